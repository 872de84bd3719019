# SPDX-License-Identifier: Apache-2.0
# Draws shares over time as an SVG line chart. Input: TIME NAME SHARE_PCT REQUEST_PCT
# (demo/shares.awk's output). Variables: title, marker_t (a vertical line, e.g. the
# resize) and marker_label. Each slice: a solid line (achieved), a dashed one (request).
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
function X(t) { return L + (t / tmax) * PW }
function Y(p) { return T + PH - (p / ymax) * PH }
BEGIN {
  W = 900; H = 480; L = 70; R = 170; T = 50; B = 60; PW = W - L - R; PH = H - T - B
  split("#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf", color, " ")
  ymax = 100; tmax = 1
}
{
  t = $1 + 0; n = $2
  if (!(n in idx)) { idx[n] = ++ns; names[ns] = n }
  i = idx[n]; k = ++np[i]
  pt[i, k] = t; ps[i, k] = $3 + 0; pr[i, k] = $4 + 0
  if (t > tmax) tmax = t
}
END {
  tmax = (tmax % 5 == 0) ? tmax : (int(tmax / 5) + 1) * 5
  printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H
  printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
  printf "<text x=\"%d\" y=\"28\" font-size=\"16\" font-weight=\"bold\">%s</text>\n", L, esc(title)
  for (p = 0; p <= ymax; p += 20) {
    printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(p), L + PW, Y(p)
    printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", L - 8, Y(p) + 4, p
  }
  for (s = 0; s <= tmax; s += 5) {
    printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", X(s), T, X(s), T + PH
    printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%ds</text>\n", X(s), T + PH + 18, s
  }
  printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", L, T, PW, PH
  printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n", L + PW / 2, H - 14
  printf "<text transform=\"translate(18,%.1f) rotate(-90)\" text-anchor=\"middle\">share of device time</text>\n", T + PH / 2
  if (marker_t != "") {
    printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>\n", X(marker_t), T, X(marker_t), T + PH
    printf "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>\n", X(marker_t) + 4, T + 14, esc(marker_label)
  }
  for (i = 1; i <= ns; i++) {
    c = color[(i - 1) % 8 + 1]
    line = ""; req = ""
    for (k = 1; k <= np[i]; k++) {
      line = line sprintf("%.1f,%.1f ", X(pt[i, k]), Y(ps[i, k] > ymax ? ymax : ps[i, k]))
      # The request as a step: hold the old value until the sample that changed it.
      if (k > 1 && pr[i, k] != pr[i, k - 1]) req = req sprintf("%.1f,%.1f ", X(pt[i, k]), Y(pr[i, k - 1]))
      req = req sprintf("%.1f,%.1f ", X(pt[i, k]), Y(pr[i, k]))
    }
    printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", c, line
    printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1\" stroke-dasharray=\"6,4\" points=\"%s\"/>\n", c, req
    ly = T + 10 + (i - 1) * 20
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + PW + 14, ly, L + PW + 34, ly, c
    printf "<text x=\"%d\" y=\"%d\">%s</text>\n", L + PW + 40, ly + 4, esc(names[i])
  }
  ly = T + 10 + ns * 20 + 10
  printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\" stroke-dasharray=\"6,4\"/>\n", L + PW + 14, ly, L + PW + 34, ly
  printf "<text x=\"%d\" y=\"%d\">request</text>\n", L + PW + 40, ly + 4
  printf "</svg>\n"
}
