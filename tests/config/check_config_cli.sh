#!/usr/bin/env bash
# assayd --check-config: a misspelt key on line 7 → "demo.yaml:7:3: …" on stderr and exit 2;
# the shipped configs → exit 0.
set -u
assayd="$1"; src="$2"
fail=0
out=$(cd "$src/tests/config/misspelt" && "$assayd" --check-config demo.yaml 2>&1); code=$?
echo "$out"
[ "$code" -eq 2 ] || { echo "FAIL: exit code $code, expected 2"; fail=1; }
case "$out" in
  "demo.yaml:7:3: kafka.partitons: unknown key; did you mean 'partitions'?") ;;
  *) echo "FAIL: unexpected message"; fail=1 ;;
esac
for f in config/demo.yaml config/assayd.example.yaml; do
  "$assayd" --check-config "$src/$f" || { echo "FAIL: $f does not validate"; fail=1; }
done
"$assayd" --config "$src/tests/config/misspelt/demo.yaml" >/dev/null 2>&1; code=$?
[ "$code" -eq 2 ] || { echo "FAIL: --config with a bad file exited $code, expected 2"; fail=1; }
"$assayd" --bogus >/dev/null 2>&1; code=$?
[ "$code" -eq 2 ] || { echo "FAIL: unknown argument exited $code, expected 2"; fail=1; }
[ $fail -eq 0 ] && echo "check_config_cli: all passed"
exit $fail
