"""Reading real DICOM and NIfTI files: planes from orientation and affines, modes, refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medrcube.construction import dicom_attributes
from medrcube.construction.readers import sources
from medrcube.construction.readers.sources import PackageFile, SourceError

CT_SMALL = PackageFile("pydicom", "pydicom", "data/test_files/CT_small.dcm")
ANATOMICAL = PackageFile("nibabel", "nibabel", "tests/data/anatomical.nii")


@pytest.mark.parametrize(
    ("iop", "plane"),
    [
        ((1, 0, 0, 0, 1, 0), "axial"),
        ((1, 0, 0, 0, -1, 0), "axial"),
        ((-1, 0, 0, 0, 1, 0), "axial"),
        ((1, 0, 0, 0, 0, -1), "coronal"),
        ((0, 1, 0, 0, 0, -1), "sagittal"),
        ((1, 0, 0, 0, 0.94, -0.34), "axial"),  # 20 degrees of tilt is still axial
        ((0.569486, 0.822001, 0, 0, 0, -1), None),  # MR2's shoulder slice: oblique
        ((-0.66, 0.75, 0, 0, 0, -1), None),  # the TOF MIP: oblique
    ],
)
def test_view_from_iop(iop: tuple[float, ...], plane: str | None) -> None:
    assert sources.view_from_iop(iop) == plane


def test_view_from_iop_rejects_degenerate_orientation() -> None:
    with pytest.raises(SourceError, match="parallel"):
        sources.view_from_iop((1, 0, 0, 1, 0, 0))


def test_display_axial_puts_anterior_up_and_patient_right_on_the_left() -> None:
    img = np.arange(12.0).reshape(3, 4)
    same, note = sources.display_axial(img, (1, 0, 0, 0, 1, 0))
    assert note == "" and np.array_equal(same, img)
    upside, note = sources.display_axial(img, (1, 0, 0, 0, -1, 0))
    assert note == "flipped up-down" and np.array_equal(upside, img[::-1])
    mirrored, note = sources.display_axial(img, (-1, 0, 0, 0, 1, 0))
    assert note == "flipped left-right" and np.array_equal(mirrored, img[:, ::-1])
    turned, note = sources.display_axial(img, (0, 1, 0, 1, 0, 0))
    assert note == "transposed" and np.array_equal(turned, img.T)
    with pytest.raises(SourceError, match="not axial"):
        sources.display_axial(img, (1, 0, 0, 0, 0, -1))


@pytest.mark.parametrize(
    ("image_type", "modes"),
    [
        (["ORIGINAL", "PRIMARY", "ABDOM/RAD", "0001"], ("2D",)),
        (["ORIGINAL", "PRIMARY", "TEE", "0011"], ("2D", "Color Doppler")),
        (["DERIVED", "PRIMARY", "X", "0108"], ("PW Doppler", "Color Power Mode")),
        (["ORIGINAL", "PRIMARY", "SMALL PARTS"], ()),
        (["ORIGINAL", "PRIMARY", "X", "zz"], ()),
        (None, ()),
    ],
)
def test_ultrasound_modes(image_type: list[str] | None, modes: tuple[str, ...]) -> None:
    assert dicom_attributes.ultrasound_modes(image_type) == modes


def test_frames_apply_the_rescale_of_a_real_ct() -> None:
    ds = sources.read_dicom(CT_SMALL.path())
    hu = sources.frames(ds)
    assert hu.shape == (1, 128, 128)
    assert np.array_equal(hu[0], ds.pixel_array.astype(float) - 1024)
    assert sources.frame_orientation(ds, 0) == (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    assert sources.frame_window(ds, 0) is None  # CT_small carries no VOI window


def test_frame_attributes_come_from_functional_groups() -> None:
    pf = PackageFile("pydicom-data", "data_store", "data/eCT_Supplemental.dcm")
    ds = sources.read_dicom(pf.path())
    assert sources.frame_window(ds, 1) == (49.0, 102.0)
    assert sources.view_from_iop(sources.frame_orientation(ds, 1)) == "axial"
    assert sources.frames(ds).min() == -1024  # shared-group rescale intercept applied


def test_read_dicom_refuses_excluded_files(tmp_path: Path) -> None:
    copy = tmp_path / "693_UNCI.dcm"
    shutil.copy(CT_SMALL.path(), copy)
    with pytest.raises(SourceError, match="excluded"):
        sources.read_dicom(copy)


def test_read_dicom_refuses_gpl_only_codecs() -> None:
    pf = PackageFile("pydicom", "pydicom", "data/test_files/MR_small_jpeg_ls_lossless.dcm")
    with pytest.raises(SourceError, match="GPL") as err:
        sources.read_dicom(pf.path())
    assert "MR_small_jpeg_ls_lossless.dcm" in str(err.value)


@pytest.mark.parametrize("gz", [False, True])
def test_read_dicom_names_a_damaged_file(tmp_path: Path, gz: bool) -> None:
    import gzip

    data = CT_SMALL.path().read_bytes()
    cases = {"empty": b"", "header": data[:100], "pixels": data[: len(data) - 1000]}
    for name, cut in cases.items():
        path = tmp_path / (f"{name}.dcm.gz" if gz else f"{name}.dcm")
        path.write_bytes(gzip.compress(cut) if gz else cut)
        with pytest.raises(SourceError) as err:
            sources.frames(sources.read_dicom(path))
        assert str(err.value).startswith(f"{path}: "), str(err.value)
    # The header-only pass reads a file cut in its pixels; the pixels are not touched.
    assert "Rows" in sources.read_dicom(tmp_path / ("pixels.dcm.gz" if gz else "pixels.dcm"), stop_before_pixels=True)
    whole = tmp_path / "whole.dcm"
    whole.write_bytes(data)
    assert sources.frames(sources.read_dicom(whole)).shape == (1, 128, 128)


def test_package_file_names_the_missing_package() -> None:
    with pytest.raises(SourceError, match="pip install no-such-dist"):
        PackageFile("no-such-dist", "no_such_module_xyz", "a.dcm").path()
    with pytest.raises(SourceError, match="not found"):
        PackageFile("pydicom", "pydicom", "data/test_files/absent.dcm").path()


def test_load_volume_reorients_a_real_las_volume_to_ras() -> None:
    img = nib.load(str(ANATOMICAL.path()))
    raw = np.asanyarray(img.dataobj, dtype=float)
    vol = sources.load_volume(ANATOMICAL.path())
    assert vol.source_axcodes == ("L", "A", "S")
    assert vol.plane_of_source_axis == ("sagittal", "coronal", "axial")
    assert np.array_equal(vol.data, raw[::-1])  # L -> R flips the first axis only
    assert vol.source_index("sagittal", 0) == (0, raw.shape[0] - 1)
    assert vol.source_index("axial", 5) == (2, 5)


def test_the_plane_of_a_permuted_volume_follows_its_affine(tmp_path: Path) -> None:
    """A volume stored as (A, S, L): fixing file axis 2 must give sagittal slices, and the
    sagittal slice shown must be exactly that file slice (mirrored for display)."""
    rng = np.random.default_rng(0)
    data = rng.random((6, 5, 4))
    affine = np.array([[0, 0, 2, 0], [3, 0, 0, 0], [0, 4, 0, 0], [0, 0, 0, 1]], dtype=float)  # i->A, j->S, k->R
    path = tmp_path / "permuted.nii.gz"
    nib.save(nib.Nifti1Image(data, affine), str(path))
    vol = sources.load_volume(path)
    assert vol.source_axcodes == ("A", "S", "R")
    assert vol.plane_of_source_axis == ("coronal", "axial", "sagittal")
    assert vol.zooms == (2.0, 3.0, 4.0)
    sl, spacing = sources.volume_slice(vol, "sagittal", 1)
    assert vol.source_index("sagittal", 1) == (2, 1)
    # Sagittal display: rows run S (top) to I, columns A (left) to P.
    assert np.array_equal(sl, data[:, :, 1].T[::-1, ::-1])
    assert spacing == (4.0, 3.0)


def test_plane_of_file_axis_follows_the_affine_and_refuses_oblique_cuts() -> None:
    vol = sources.load_volume(ANATOMICAL.path())
    assert [sources.plane_of_file_axis(vol.affine, a) for a in range(3)] == ["sagittal", "coronal", "axial"]
    # dipy's S0 volume has a sheared slice axis; its in-plane axes are exact, so it is axial.
    s0 = sources.load_volume(PackageFile("dipy", "dipy", "data/files/S0_10slices.nii.gz").path())
    assert sources.plane_of_file_axis(s0.affine, 2) == "axial"
    tilt = np.radians(35)
    rotated = np.eye(4)
    rotated[1:3, 1:3] = [[np.cos(tilt), -np.sin(tilt)], [np.sin(tilt), np.cos(tilt)]]  # 35 degrees about x
    assert nib.aff2axcodes(rotated)[2] == "S"  # the axis codes still say S...
    assert sources.plane_of_file_axis(rotated, 2) is None  # ...but the cut is oblique
    assert sources.plane_of_file_axis(rotated, 0) == "sagittal"
