#!/usr/bin/env bash
# scripts/train_claim_support is reproducible: retrained from the train file in a scratch folder,
# the weights and the pins equal the committed ones byte for byte (docs/claim-support.md).
set -euo pipefail
tool="$1"; src="$2"; data="$3"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$src/scripts/train_claim_support" --tool "$tool" --data "$data" --out "$out"
fail=0
for f in judges/data/claim_support_weights.json tests/judges/data/claim_support_pins.json; do
  if ! cmp "$src/$f" "$out/$f"; then
    echo "FAIL: $f differs from a retraining:"; diff "$src/$f" "$out/$f" | head -20; fail=1
  fi
done
[ $fail -eq 0 ] && echo "train_claim_support: the committed weights and pins are reproduced byte for byte"
exit $fail
