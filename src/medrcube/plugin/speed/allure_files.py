"""Allure's files made with less of the process's time: the same files, byte for byte.

- **Encoded by the C JSON encoder** (`encode_results_in_c`). allure-python-commons writes each
  test result and fixture container with `json.dump(data, file)`. `json.dump` always runs the
  json module's pure-Python encoder (only `json.dumps` without an indent takes the C one), and a
  gate run writes three such files a case, after the last answer: 332 files at the paper's
  scale (0.101 -> 0.065 ms an item on a gate case's items, benchmarks/allure_writer.py;
  docs/speed.md). Here the one file logger allure-pytest registered gets, as an attribute of
  that instance, an item writer that encodes the very dict allure's would (`attr.asdict` with
  allure's filter) with `json.dumps`. `json.dump` and `json.dumps` make the same text for the
  same arguments, so the files are the same; tests/plugin/test_allure_files.py compares them
  with allure's own.
- **Written by a second interpreter** (`hand_files_to_a_writer`). A case's files (its result,
  its two fixtures' containers, its two attachments: about 550 files at the paper's scale) are
  each created, written and renamed after the last answer, where every millisecond of the
  process is the run's tail. With many cases and a second core, a small stdlib-only
  interpreter is started that takes each file's name and bytes through a pipe and writes it as
  allure does (a `.tmp` beside it, then renamed), on the other core, while the process goes on
  to its next case. The process keeps what it handed over until the writer has ended well
  (`wait_for_files`: before the process reads the directory itself, the run's trend, and at the
  session's cleanup, before allure's logger is unregistered): if the
  writer could not be started, died, or was refused a file, the process writes every file itself
  (the same names: a file the writer had written is replaced by the same bytes). So the files
  are there when pytest returns, whatever happened to the writer.

Only an `AllureFileLogger` instance of allure-python-commons is changed, and only while its
indented output (ALLURE_INDENT_OUTPUT) is off; anything else is left as allure made it.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import uuid
from typing import Any

_ATTRIBUTE = "_report_item"  # the method allure's hooks call, through the instance, for every item

# Below this many cases the writer's start (a second interpreter: about 10 ms of CPU on the other
# core, and a spawn here) costs about what it saves (a file handed over instead of written:
# 0.05-0.3 ms saved a file, five files a case).
WRITER_MIN_CASES = 20

# How long the session's end waits for the writer to finish its last files before it takes them
# over (a stopped or starved writer: the files are then written here, none is lost).
WRITER_PATIENCE_S = 30.0

# Files are sent in pieces of about this size: a case's five files are 5-15 KB.
SEND_BYTES = 64 * 1024

_HEADER = struct.Struct("<II")  # a file's name length, then its data length, in bytes
# The end, said rather than left to the pipe's end: a process forked meanwhile (a test's own
# child that outlives its case) holds a copy of the pipe, and the writer would wait for it.
_END = _HEADER.pack(0xFFFFFFFF, 0)

# The writer: the standard library only, started isolated (-I: no environment, no user site;
# -S: no site), so it starts in a few milliseconds and imports nothing of the project's.
# It ends at the process's end mark (`_END`), or at the end of its input (at once: from the end of its
# input to its exit 3.3 ms with the interpreter's teardown, 0.8 ms without). A name with a directory
# in it, or a stream cut inside a file, ends it with status 3: the process then writes every file
# itself. Ctrl-C reaches the whole process group: the writer ignores it and goes on to the end
# mark, which the process still sends as pytest ends.
_WRITER = r"""
import os, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
directory, header, stream = sys.argv[1], struct.Struct("<II"), sys.stdin.buffer
while True:
    head = stream.read(header.size)
    if not head:
        break
    if len(head) < header.size:
        sys.exit(3)
    name_length, data_length = header.unpack(head)
    if name_length == 0xFFFFFFFF:
        break
    name = stream.read(name_length).decode("utf-8")
    data = stream.read(data_length)
    if len(data) < data_length or os.path.basename(name) != name or name in ("", ".", ".."):
        sys.exit(3)
    temporary = os.path.join(directory, name + ".tmp")
    with open(temporary, "wb") as fh:
        fh.write(data)
    os.replace(temporary, os.path.join(directory, name))
os._exit(0)  # every file closed and in place: no interpreter teardown for the process to wait for
"""


def write_file(directory: str, name: str, data: bytes) -> None:
    """One of allure's files, as allure writes it: a `.tmp` file beside it, then renamed."""
    temporary = os.path.join(directory, f"{name}.tmp")
    with open(temporary, "wb") as fh:
        fh.write(data)
    os.replace(temporary, os.path.join(directory, name))


class FileWriter:
    """Allure's files of one results directory handed to a writer interpreter (`_WRITER`)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.handed: list[tuple[str, bytes]] = []  # what the writer was given: written here if it fails
        self.pending = bytearray()  # files not yet sent
        self.failed = False
        self.process: subprocess.Popen[bytes] | None = None
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WRITER, directory],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, bufsize=0)
        except OSError:
            self.failed = True
            return
        with contextlib.suppress(AttributeError, OSError):  # a larger pipe: a case's files never wait for the writer
            import fcntl

            fcntl.fcntl(self.process.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[union-attr]

    def put(self, name: str, data: bytes) -> None:
        if self.failed or self.process is None or self.process.stdin is None:
            write_file(self.directory, name, data)
            return
        self.handed.append((name, data))
        encoded = name.encode("utf-8")
        self.pending += _HEADER.pack(len(encoded), len(data))
        self.pending += encoded
        self.pending += data
        if len(self.pending) >= SEND_BYTES:
            self.send()

    def send(self) -> None:
        """What is pending, through the pipe (`SEND_BYTES` at a time: each write to a pipe its
        reader waits on wakes it, which cost the process 0.05-0.08 ms a file sent one by one)."""
        message, self.pending = memoryview(self.pending), bytearray()
        if self.failed or self.process is None or self.process.stdin is None:
            return
        try:
            while message:  # a raw pipe may take part of a large write
                message = message[self.process.stdin.write(message) or 0:]
        except OSError:  # the writer is gone: what it was given is written at the end
            self.failed = True

    def close(self) -> None:
        """Wait for the writer's last file; if it did not end well, write every file it was given here."""
        self.pending += _END
        self.send()
        process, self.process = self.process, None
        ended_well = False
        if process is not None:
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
            try:
                ended_well = process.wait(timeout=WRITER_PATIENCE_S) == 0
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if not ended_well or self.failed:
            for name, data in self.handed:
                write_file(self.directory, name, data)
        self.handed = []
        self.failed = True  # anything reported after the end is written here


def _keep(_attribute: Any, value: Any) -> bool:
    return bool(value) or value is False  # allure's own filter: empty values are not written


class _Sink:
    """Where a logger's files go: written here, or handed to a `FileWriter`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.writer: FileWriter | None = None

    def put(self, name: str, data: bytes) -> None:
        if self.writer is not None:
            self.writer.put(name, data)
        else:
            write_file(self.directory, name, data)


_WRITERS: list[FileWriter] = []  # this process's open writers (`send_pending_files`, `wait_for_files`)
_SINKS: list[_Sink] = []  # the sinks handing their files to them


def send_pending_files() -> None:
    """What this process's writers hold, sent: called once its cases have run, so that their last
    files are written while the session ends (the run directory), not when it waits for the writer."""
    for writer in _WRITERS:
        writer.send()


def wait_for_files() -> None:
    """Every file handed over is in its directory when this returns (each writer waited for, or its
    files written here), and what allure reports from now on is written here: called before anything
    reads the results directory (the run's trend counts its result files), and at the session's cleanup."""
    for sink in _SINKS:
        sink.writer = None
    writers, _WRITERS[:], _SINKS[:] = list(_WRITERS), [], []
    for writer in writers:
        writer.close()


_SINK = "_medrcube_sink"  # the logger's `_Sink`, set beside its C item writer


def encode_results_in_c() -> int:
    """Give allure's registered file loggers the C-encoding item writer; how many were given it."""
    try:
        import allure_commons
        from allure_commons.logger import AllureFileLogger
        from attr import asdict
    except ImportError:  # allure-pytest not installed: nothing to speed up
        return 0
    if os.environ.get("ALLURE_INDENT_OUTPUT"):
        return 0  # indented files: allure's own writer (an indent takes the pure-Python encoder anyway)
    given = 0
    for plugin in allure_commons.plugin_manager.get_plugins():
        if type(plugin) is not AllureFileLogger or _ATTRIBUTE in vars(plugin):
            continue
        sink = _Sink(os.fspath(plugin._report_dir))

        def report_item(item: Any, sink: _Sink = sink) -> None:
            text = json.dumps(asdict(item, filter=_keep), ensure_ascii=False)
            sink.put(item.file_pattern.format(prefix=uuid.uuid4()), text.encode("utf-8"))

        setattr(plugin, _ATTRIBUTE, report_item)
        setattr(plugin, _SINK, sink)
        given += 1
    return given


def hand_files_to_a_writer(config: Any, cases: int) -> bool:
    """With `cases` or more cases to run here and a second core, the files of allure's file loggers
    that have the C item writer (results, containers, attached data) handed to a `FileWriter`, waited
    for by `wait_for_files` (at the latest at this session's cleanup, before allure's own unregisters
    its logger); whether it was."""
    from medrcube.cube.decode_workers import cores

    if cases < WRITER_MIN_CASES or cores() < 2:
        return False
    try:
        import allure_commons
    except ImportError:
        return False
    started = False
    for plugin in allure_commons.plugin_manager.get_plugins():
        sink = vars(plugin).get(_SINK) if hasattr(plugin, "__dict__") else None
        if not isinstance(sink, _Sink) or sink.writer is not None:
            continue
        attached = [impl for impl in allure_commons.plugin_manager.hook.report_attached_data.get_hookimpls()
                    if impl.plugin is plugin and tuple(impl.argnames) == ("body", "file_name")]
        writer = sink.writer = FileWriter(sink.directory)
        _WRITERS.append(writer)
        _SINKS.append(sink)

        def attached_data(body: Any, file_name: str, sink: _Sink = sink) -> None:
            sink.put(file_name, body.encode("utf-8") if isinstance(body, str) else bytes(body))

        for impl in attached:  # allure's `report_attached_data` of this logger: the same bytes, handed over
            impl.function = attached_data
        started = True
    if started:
        config.add_cleanup(wait_for_files)  # before allure's own cleanup unregisters its logger
    return started
