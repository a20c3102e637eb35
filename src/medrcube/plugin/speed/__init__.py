"""What makes a gate run start and end fast; none of it changes what is asked or decided
(docs/speed.md):

- `assert_rewriting`: pytest's assertion rewriting narrowed to the packaged suite;
- `early_inference`: the inference started at session start, on a thread, when nothing in
  the invocation can deselect the gate's cases;
- `tail_ahead`: what the end of a run needs and its answers do not, done while they come in;
- `frozen_heap`: the heap frozen after inference, thawed after pytest's end;
- `feasibility_memo`: the start-up's feasibility pass remembered per cube content.
- `allure_files`: Allure's result files encoded by the C JSON encoder (the same bytes) and,
  with many cases, written by a second interpreter on the other core.

None of it is a rule of the gate: take any module away and every verdict, output and
error stays the same, only slower. Only the room's package, its hooks, its session and its
leakage reading import these (tests/architecture/test_speed_room.py)."""
