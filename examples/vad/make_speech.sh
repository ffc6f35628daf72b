#!/usr/bin/env bash
# A test recording for vad.py: sentences spoken by espeak-ng, with silence
# around and between them, at 16 kHz mono 16-bit. Prints each sentence's
# start and end in seconds, one "START END" line per sentence.
#   examples/vad/make_speech.sh OUT.wav
set -euo pipefail
out=${1:?usage: make_speech.sh OUT.wav}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lead=1.5 gap=2.0 tail=1.5
sentences=("The quick brown fox jumps over the lazy dog."
           "Voice activity detection finds the speech and not the silence.")
parts=() t=$lead
for i in "${!sentences[@]}"; do
  espeak-ng -s 150 -w "$tmp/raw$i.wav" "${sentences[$i]}"
  sox -G "$tmp/raw$i.wav" -r 16000 -c 1 -b 16 "$tmp/s$i.wav"
  # espeak pads its output: measure the voiced part, not the file.
  sox "$tmp/s$i.wav" "$tmp/t$i.wav" silence 1 0.01 0.5% reverse silence 1 0.01 0.5% reverse
  d=$(soxi -D "$tmp/t$i.wav")
  awk -v t="$t" -v d="$d" 'BEGIN { print t, t + d }'
  t=$(awk -v t="$t" -v d="$d" -v g="$gap" 'BEGIN { print t + d + g }')
  parts+=("$tmp/t$i.wav")
done
sox -n -r 16000 -c 1 -b 16 "$tmp/lead.wav" trim 0 "$lead"
sox -n -r 16000 -c 1 -b 16 "$tmp/gap.wav" trim 0 "$gap"
sox -n -r 16000 -c 1 -b 16 "$tmp/tail.wav" trim 0 "$tail"
sox "$tmp/lead.wav" "${parts[0]}" "$tmp/gap.wav" "${parts[1]}" "$tmp/tail.wav" "$out"
