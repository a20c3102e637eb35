"""The release-layout loader on a generated cube."""

from medrcube.cube import load_cube


def test_small_generated_cube_loads(small_cube_template):
    cube = load_cube(small_cube_template)
    assert len(cube) == 60
    assert all(i.image is None for i in cube if i.restricted) or any(i.restricted for i in cube)
    assert cube.skipped == ()
    for item in cube:
        if item.image is not None:
            assert cube.read_image(item.image)[:8] == b"\x89PNG\r\n\x1a\n"
