// Utf8Stream: whole characters only, incomplete tails held, invalid bytes as
// U+FFFD, against hand-written cases and against Python's incremental UTF-8
// decoder (errors="replace") on random bytes pushed in random pieces.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "rlx/utf8.h"
#include "support/testing.h"

namespace rlx {
namespace {

const std::string kR = "\xEF\xBF\xBD";

std::string feed(const std::vector<std::string>& pieces, std::string* last = nullptr) {
  Utf8Stream s;
  std::string out;
  for (const std::string& p : pieces) {
    const std::string got = s.push(p);
    out += got;
    if (last) *last = got;
  }
  return out + s.finish();
}

TEST(Utf8Stream, HoldsASplitCharacterUntilItCompletes) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xE2\x82"), "a");  // "€" = E2 82 AC, two of its bytes
  EXPECT_EQ(s.pending(), 2u);
  EXPECT_EQ(s.push("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.push("\xF0\x9F"), "");  // half an emoji at the end of the stream
  EXPECT_EQ(s.finish(), kR);
  EXPECT_EQ(s.finish(), "");
}

TEST(Utf8Stream, ReplacesWhatCanNeverBeValid) {
  EXPECT_EQ(feed({"\x80x"}), kR + "x");                      // a lone continuation byte
  EXPECT_EQ(feed({"\xC0\xAF"}), kR + kR);                    // an overlong '/'
  EXPECT_EQ(feed({"\xED\xA0\x80"}), kR + kR + kR);           // a surrogate
  EXPECT_EQ(feed({"\xF4\x90\x80\x80"}), kR + kR + kR + kR);  // above U+10FFFF
  EXPECT_EQ(feed({"\xE2\x82", "x"}), kR + "x");              // broken off: one replacement
  EXPECT_EQ(feed({"\xFF", "\xF0\x9F\x98\x80"}), kR + "\xF0\x9F\x98\x80");
}

TEST(Utf8Stream, MatchesPythonsIncrementalDecoderOnRandomBytes) {
  // Bytes biased toward UTF-8's interesting ranges, in random pieces.
  std::mt19937 rng(7);
  const std::filesystem::path dir = testing::process_temp_dir("utf8_stream");
  std::ofstream cases(dir / "cases.txt");
  std::vector<std::string> want_ours;
  for (int c = 0; c < 300; ++c) {
    std::vector<std::string> pieces;
    std::string line;
    const int np = 1 + int(rng() % 6);
    for (int p = 0; p < np; ++p) {
      std::string piece;
      const int nb = int(rng() % 5);
      for (int k = 0; k < nb; ++k) {
        const uint8_t pools[] = {0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0,
                                 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xC0, 0xFF};
        piece += char(rng() % 3 ? pools[rng() % 16] : uint8_t(rng()));
      }
      pieces.push_back(piece);
      char hex[3];
      line += p ? " " : "";
      line += "x";  // an empty piece needs a token too
      for (unsigned char ch : piece) {
        std::snprintf(hex, sizeof hex, "%02x", ch);
        line += hex;
      }
    }
    cases << line << "\n";
    want_ours.push_back(feed(pieces));
  }
  cases.close();
  const std::string py =
      "import codecs, sys\n"
      "for line in open(sys.argv[1]):\n"
      "    d = codecs.getincrementaldecoder('utf-8')(errors='replace')\n"
      "    s = ''.join(d.decode(bytes.fromhex(p[1:])) for p in line.split()) + d.decode(b'', "
      "True)\n"
      "    print(s.encode('utf-8').hex())\n";
  std::ofstream(dir / "ref.py") << py;
  const testing::CliResult r = testing::run_command("python3 " + (dir / "ref.py").string() + " " +
                                                    (dir / "cases.txt").string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  std::string hexline;
  for (size_t c = 0; c < want_ours.size(); ++c) {
    ASSERT_TRUE(std::getline(lines, hexline)) << "python printed fewer lines";
    std::string ours;
    char hex[3];
    for (unsigned char ch : want_ours[c]) {
      std::snprintf(hex, sizeof hex, "%02x", ch);
      ours += hex;
    }
    EXPECT_EQ(ours, hexline) << "case " << c;
  }
}

}  // namespace
}  // namespace rlx
