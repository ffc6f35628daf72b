#!/usr/bin/env bash
# Test images for ocr.py: black ASCII text on white, rendered by ImageMagick
# in the DejaVu fonts at several sizes. Writes OUTDIR/NAME.png and next to it
# OUTDIR/NAME.txt, the expected text, one line per rendered line.
#   examples/ocr/make_images.sh OUTDIR
set -euo pipefail
out=${1:?usage: make_images.sh OUTDIR}
mkdir -p "$out"
command -v convert >/dev/null || { echo "make_images.sh: ImageMagick's convert is missing" >&2; exit 1; }
# Without the font ImageMagick falls back to another one and the texts no longer read as expected.
fonts=$(convert -list font)
for f in DejaVu-Sans DejaVu-Serif DejaVu-Sans-Mono; do
  grep -q "Font: $f\$" <<<"$fonts" || { echo "make_images.sh: font $f is missing (fonts-dejavu-core)" >&2; exit 1; }
done
# The recognizer, a general Chinese+English model, often leaves out the space
# between words or reads "o" as "0" on such clean renders (ONNX Runtime reads
# them the same way), and at 56 pt in Mono the detector boxes each word apart.
# These texts it reads right at PaddleOCR's default settings, and still does
# with any box edge moved by a pixel or two, so they test rlx, not luck.
# name|font|pointsize|line 1|line 2 (optional)
cases=(
  "sans28|DejaVu-Sans|28|Report-2024|QX5-880"
  "sans40|DejaVu-Sans|40|Chapter 12|Quantity: 12"
  "sans56|DejaVu-Sans|56|Meeting room B-12 at 9:30|Thank you for your order"
  "serif28|DejaVu-Serif|28|QX5-880|A1B2C3"
  "serif40|DejaVu-Serif|40|Order 7731|Page 17 of 240"
  "serif56|DejaVu-Serif|56|Serial K9-4471|Welcome back"
  "mono28|DejaVu-Sans-Mono|28|QX5-880|Report-2024"
  "mono40|DejaVu-Sans-Mono|40|Total 1385.40|Thank you for your order"
  "mono56|DejaVu-Sans-Mono|56|A1B2C3"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name font size l1 l2 <<<"$c"
  text=$l1 expect=$l1
  if [[ -n ${l2:-} ]]; then text+=$'\n'$l2; expect+=$'\n'$l2; fi
  # Line spacing a bit over the font's so that detection keeps lines apart, as on a page.
  convert -background white -fill black -font "$font" -pointsize "$size" \
    -interline-spacing $((size / 3)) label:"$text" \
    -bordercolor white -border $((size / 2 + 16)) -alpha off "$out/$name.png"
  printf '%s\n' "$expect" >"$out/$name.txt"
done
