#!/bin/sh
# Lay out the outside programs and their data for tools/outside/run_all.py:
#   tools/outside/prepare.sh DEST [MIRRORS]
# DEST/src: nanoGPT model.py, ng-video-lecture gpt.py, pytorch/examples word_language_model
# (model.py, main.py, data.py) taken unchanged from the fetched repositories (MIRRORS holds
# owner+name/repo git directories, as the fetch tool leaves them); DEST/data: tiny shakespeare
# and a word-level corpus from its first 5000 lines (train 0-3999, valid 4000-4499, test 4500-4999)
# in word_language_model's folder format.
set -e
DEST=${1:?destination folder}
M=${2:-/work/.mirror}
TS=${TS:-/work/shared/data/tinyshakespeare/input.txt}
mkdir -p "$DEST/src/wlm" "$DEST/data/shakespeare-words"
git -C "$M/karpathy+nanoGPT/repo" show HEAD:model.py > "$DEST/src/nanogpt_model.py"
git -C "$M/karpathy+ng-video-lecture/repo" show HEAD:gpt.py > "$DEST/src/gpt.py"
for f in model.py main.py data.py; do
  git -C "$M/pytorch+examples/repo" show "HEAD:word_language_model/$f" > "$DEST/src/wlm/$f"
done
{ for r in karpathy+nanoGPT karpathy+ng-video-lecture pytorch+examples; do
    git -C "$M/$r/repo" log -1 --format="$r %H" ; done; } > "$DEST/src/COMMITS"
cp "$TS" "$DEST/data/input.txt"
W="$DEST/data/shakespeare-words"
sed -n '1,4000p' "$TS" > "$W/train.txt"
sed -n '4001,4500p' "$TS" > "$W/valid.txt"
sed -n '4501,5000p' "$TS" > "$W/test.txt"
echo "prepared $DEST"
