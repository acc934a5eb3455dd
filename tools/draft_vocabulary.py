"""Give an ordinary draft folder a reduced output vocabulary: the draft vocabulary of a trained head.

    python -m tools.draft_vocabulary HEAD_FOLDER DRAFT_FOLDER

writes DRAFT_FOLDER/specui_vocabulary.json with the ids of HEAD_FOLDER's output layer (`output.token_ids`
in its head.safetensors, or its shards head-01.safetensors...: `python -m specui.train heads --vocab N` picks
the N ids the target wrote most often). When a preset loads the draft, its output layer keeps those rows only
(specui.chat_draft.restrict_vocabulary): a cheaper draft step, the same target, exact verification.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specui.chat_draft import VOCABULARY
from specui.heads.common import is_head_folder, load_state, read_meta


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("head", help="a head folder written by python -m specui.train heads --vocab N")
    p.add_argument("draft", help="the draft folder to write specui_vocabulary.json into")
    args = p.parse_args(argv)
    if not is_head_folder(args.head):
        raise SystemExit(f"{args.head}: not a head folder (python -m specui.train heads writes one)")
    if not Path(args.draft).is_dir():  # the vocabulary goes beside the draft's weights, in a folder that exists
        raise SystemExit(f"{args.draft}: no such folder (give the draft model's folder, where its config.json is)")
    meta = read_meta(args.head)
    tensors = load_state(args.head)  # head.safetensors, or a head above 8 MB in shards (the chat heads)
    if "output.token_ids" not in tensors:
        raise SystemExit(f"{args.head}: this head scores the whole vocabulary (train it with --vocab N)")
    ids = tensors["output.token_ids"].tolist()
    picked = meta.get("data", "") or f"the draft vocabulary of the head in {args.head}"
    out = Path(args.draft) / VOCABULARY
    out.write_text(json.dumps({"token_ids": ids, "picked": f"{len(ids)} ids from {args.head}: {picked}"}) + "\n")
    print(f"wrote {out}: {len(ids)} ids")


if __name__ == "__main__":
    main()
