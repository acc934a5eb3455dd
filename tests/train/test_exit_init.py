"""`python -m specui.train exit --init HEAD`: what the warm start keeps of HEAD is settled before the target loads. An
--mlp-hidden other than the width of HEAD's own MLP (whose trained weights keep their shape) is refused in one line,
not ignored; the same width, or a width for a head without an MLP (a new one grows), is taken. An --init that is no
early-exit head folder is refused as the arguments are parsed."""

import pytest
import torch

from specui.heads import common
from specui.heads.early_exit import EarlyExitHead
from specui.heads.medusa import build as medusa
from specui.train.exit_head import build_head, main, parse_args
from tests.helpers import make_config


def tiny_target():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(make_config("llama", vocab_size=64, layers=2, hidden=32)).eval()


def save_exit_head(folder, *, mlp_hidden: int = 0, target=None):
    """An untrained early-exit head of a tiny random Llama saved in `folder`, as `--init` reads one."""
    common.save(EarlyExitHead(target or tiny_target(), token_ids=torch.arange(40), exit_layer=1,
                              mlp_hidden=mlp_hidden), folder)
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Two early-exit heads of a tiny random Llama (one with an MLP 16 wide, one without) and a Medusa head."""
    root, target = tmp_path_factory.mktemp("heads"), tiny_target()
    save_exit_head(root / "wide", mlp_hidden=16, target=target)
    save_exit_head(root / "plain", target=target)
    common.save(medusa(target, token_ids=torch.arange(40), num_heads=2), root / "medusa")
    return root


def _refusal(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_mlp_width_the_init_head_does_not_have_is_refused_in_one_line(saved, tmp_path, capsys):
    argv = ["--answers", str(tmp_path), "--out", str(tmp_path / "out")]
    line = _refusal([*argv, "--init", str(saved / "wide"), "--mlp-hidden", "32"], capsys)
    assert line.endswith(f"--mlp-hidden 32: --init {saved / 'wide'}'s head has an MLP 16 wide, which it keeps (its "
                         "trained weights have that shape): drop --mlp-hidden, or train a fresh head (no --init)")
    assert parse_args([*argv, "--init", str(saved / "wide"), "--mlp-hidden", "16"]).mlp_hidden == 16
    assert parse_args([*argv, "--init", str(saved / "plain"), "--mlp-hidden", "32"]).mlp_hidden == 32  # grows one


def test_an_init_that_is_no_early_exit_head_is_refused_before_the_target_loads(saved, tmp_path, capsys):
    argv = ["--answers", str(tmp_path), "--out", str(tmp_path / "out")]
    assert _refusal([*argv, "--init", str(tmp_path / "none")], capsys).endswith(
        f"--init {tmp_path / 'none'}: no saved head there (expected {tmp_path / 'none' / common.META})")
    assert _refusal([*argv, "--init", str(saved / "medusa")], capsys).endswith(
        f"--init {saved / 'medusa'}: a medusa head, not an early-exit head")


def test_an_init_head_of_another_target_is_one_line(saved, tmp_path):
    from transformers import LlamaForCausalLM

    other = LlamaForCausalLM(make_config("llama", vocab_size=64, layers=2, hidden=48)).eval()  # another width
    args = parse_args(["--answers", str(tmp_path), "--out", str(tmp_path / "out"), "--init", str(saved / "wide")])
    with pytest.raises(SystemExit, match=r"^--init: .*wide: this head was trained for a target with"):
        build_head(args, other, [])


def test_answers_that_are_not_there_are_refused_before_the_target_loads(tmp_path, capsys):
    """A mistyped --answers folder was reported after the target loaded, as 'no answers-*.pt files' in it."""
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "bundled", "--answers", str(tmp_path / "typo"), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"--answers: {tmp_path / 'typo'} is not a folder")


def test_sampled_answers_without_their_greedy_tokens_are_refused_before_the_target_loads(tmp_path, capsys):
    """A folder of sampled answers alone (--write-answers --sample) was refused after the target loaded, telling the
    user to 'leave --hard-labels out', a flag this trainer does not have; it is refused as the run starts, naming
    the command that labels them; once labelled (argmax-sampled-*.pt beside them) the folder passes."""
    answers = tmp_path / "sampled"
    answers.mkdir()
    (answers / "sampled-00000.pt").touch()
    argv = ["--preset", "bundled", "--answers", str(answers), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv, create=True)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--answers: {answers} holds sampled answers only, and python -m specui.train exit learns the target's greedy "
        f"tokens, which sampled answers lack until labelled: python -m specui.train.greedy_labels --answers {answers} "
        "writes them, or add a folder of greedy answers (answers-*.pt)")
    (answers / "argmax-sampled-00000.pt").touch()
    assert parse_args(argv, create=True).answers == str(answers)
