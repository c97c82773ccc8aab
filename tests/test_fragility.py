"""standarderror_book.fragility: settings, and the report's counts on results made up for the test."""

import json
from pathlib import Path

import pytest

from standarderror_book import fragility

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("bad", ["native", "avx3/1", "default/two", "/2", "old/0", "old/²"])
def test_a_setting_is_capability_slash_threads(bad):
    with pytest.raises(Exception, match="CAPABILITY/THREADS"):
        fragility.parse_setting(bad)


def test_native_unsets_the_capability(monkeypatch):
    from standarderror_book.page import arithmetic_env

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    env = arithmetic_env("native/2")
    assert "ATEN_CPU_CAPABILITY" not in env and env["OMP_NUM_THREADS"] == "2"
    env = arithmetic_env("avx2/1")
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["OMP_NUM_THREADS"] == "1"


def test_an_emulated_cpu_forces_every_library_and_other_settings_keep_the_machines(monkeypatch):
    """An emulated CPU forces torch's capability and every library's kernels; any other
    setting keeps the library variables the machine sets (a machine may need them), and
    OPENBLAS_L2_SIZE, which no emulated CPU forces, is kept by all."""
    from standarderror_book.page import KERNEL_VARIABLES, arithmetic_env

    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")  # the machine's
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    env = arithmetic_env("old/1")
    assert {k: env[k] for k in ("ATEN_CPU_CAPABILITY", *KERNEL_VARIABLES)} == {
        "ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Nehalem",
        "OPENBLAS_L2_SIZE": "512", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41"}
    assert arithmetic_env("laptop/2")["OPENBLAS_CORETYPE"] == "Haswell"
    assert {k: arithmetic_env("amd/2")[k] for k in ("ATEN_CPU_CAPABILITY", *KERNEL_VARIABLES)} == {
        "ATEN_CPU_CAPABILITY": "avx512", "OPENBLAS_CORETYPE": "SkylakeX",
        "OPENBLAS_L2_SIZE": "512", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
    for setting in ("native/2", "default/1"):
        env = arithmetic_env(setting)
        assert (env["OPENBLAS_CORETYPE"], env["OPENBLAS_L2_SIZE"]) == ("Prescott", "512")
    assert arithmetic_env("native/2", {"PATH": "/bin"}) == {"PATH": "/bin", "OMP_NUM_THREADS": "2"}


def _result(out: Path, setting: str, pins: dict, outputs: list) -> None:
    path = fragility.result_path(out, setting, "book/model.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"page": "book/model.md", "code_sha256": "", "capability": "X",
                                "wall_s": 1, "cpu_s": 1, "pins": pins, "outputs": outputs,
                                "figures": []}))


def test_report_counts_changes_crossings_and_failures(tmp_path, capsys):
    # book/model.md quotes val_loss=1.55, test_loss=1.54, vocab=77, parameters=811,392 and
    # uniform_loss=4.34. Made-up values: the reference sits inside every quote's interval.
    ref = {"val_loss": "1.5501", "test_loss": "1.5449", "vocab": "77", "parameters": "811392",
           "uniform_loss": "4.3402"}
    _result(tmp_path, "native/2", ref, [[0, "loss 1.5501"]])
    moved = dict(ref, val_loss="1.55010001",          # changed, no boundary crossed
                 test_loss=str(1.545 + 0.03e-2),      # 0.03 units past 1.545: absorbed
                 uniform_loss=str(4.345 + 0.2e-2))    # 0.2 units past 4.345: fails
    _result(tmp_path, "default/1", moved, [[0, "loss 1.5502"]])
    code = fragility.report(["book/model.md"], ["native/2", "default/1"], tmp_path)
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "| default/1 |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    # uniform_loss is quoted twice (the page and the syllabus): two quotes cross, both fail
    assert cells[1:8] == ["5", "default/1", "3", f"{(4.347 - 4.3402) / 4.347:.1e}", "3", "1",
                          "2"], row
    assert cells[8:11] == ["1", "1", "1"]               # one output, one number, one unit
    assert cells[11] == "1"
    assert code == 1
    assert "book/model.md:" in text and "book/syllabus.md:" in text
    assert "uniform_loss=4.34: computed 4.35" in text
    assert (tmp_path / "report.md").is_file()


def test_printed_numbers_move_in_units_of_their_last_digit():
    """The issue's case: -1.65e-05 printed as -1.62e-05 is three units; one unit is a rounding
    boundary crossed; other text, or another form, cannot be compared number by number."""
    ref = {4: "n =  1,024   plug-in 2.40e-03   debiased -1.65e-05 (se 7.3e-05)\nz 0.65\n"}
    moves = fragility.printed_moves(ref, {4: ref[4].replace("-1.65e-05", "-1.62e-05")
                                          .replace("0.65", "0.66")})
    assert [(m[3], m[4]) for m in moves if m[2]] == [("-1.65e-05", "-1.62e-05"), ("0.65", "0.66")]
    assert [m[2] for m in moves if m[2]] == [3.0, 1.0]
    assert all(m[2] == 0 for m in moves if m[3] == m[4])
    assert fragility.printed_moves({0: "a 0.50"}, {0: "b 0.50"})[0][2] == float("inf")
    assert fragility.printed_moves({0: "a 0.50"}, {0: "a 0.5"})[0][2] == float("inf")
    assert fragility.printed_moves({0: "a\nb"}, {0: "a"})[0][2] == float("inf")


def test_report_fails_on_a_printed_number_that_moves_more_than_one_unit(tmp_path, capsys):
    ref = {"val_loss": "1.5501", "test_loss": "1.5449", "vocab": "77", "parameters": "811392",
           "uniform_loss": "4.3402"}
    _result(tmp_path, "native/2", ref, [[0, "debiased -1.65e-05 (se 7.3e-05)"]])
    _result(tmp_path, "amd/2", ref, [[0, "debiased -1.62e-05 (se 7.3e-05)"]])
    assert fragility.report(["book/model.md"], ["native/2", "amd/2"], tmp_path) == 1
    text = capsys.readouterr().out
    assert "'-1.65e-05' -> '-1.62e-05' (3 in the last printed digit)" in text
    _result(tmp_path, "amd/2", ref, [[0, "debiased -1.64e-05 (se 7.3e-05)"]])
    assert fragility.report(["book/model.md"], ["native/2", "amd/2"], tmp_path) == 0
    assert "(one unit: a rounding boundary" in capsys.readouterr().out
