// sha256: the digest a reviewer's `sha256sum` gives, and the same digest when
// a run hashes its bodies from the state after their shared few-shot block.
#include <harness/util/hash.hpp>

#include <gtest/gtest.h>

#include <string>

namespace diffeval::util {
namespace {

TEST(Sha256, MatchesTheStandardTestVectors) {
    // FIPS 180-2 appendix B.1 and the empty message.
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// The digest in base64, as a Content-Security-Policy names a script: the
// standard vector's bytes, not its hex text's.
TEST(Sha256, InBase64IsTheDigestsBytes) {
    EXPECT_EQ(sha256_base64("abc"), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
    EXPECT_EQ(sha256_base64(""), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
}

TEST(Sha256Prefix, GivesTheWholeTextsDigestWhateverThePrefixLength) {
    // Prefix lengths around SHA-256's 64-byte block, where a kept partial
    // block matters, and texts that do and do not start with the prefix.
    std::string shots;
    for (int i = 0; shots.size() < 300; ++i) {
        shots += "Question: " + std::to_string(i * 7919) + " apples?\nAnswer: #### 4\n\n";
    }
    for (size_t cut : {0, 1, 55, 63, 64, 65, 127, 128, 200, 300}) {
        const std::string prefix = shots.substr(0, cut);
        const Sha256Prefix hasher(prefix);
        for (const std::string& tail :
             {std::string(), std::string("Question: how many?\nAnswer:"), std::string(70, 'x')}) {
            const std::string body = prefix + tail;
            EXPECT_EQ(hasher.hex(body), sha256_hex(body)) << cut << " + " << tail.size();
        }
        // A text that does not start with the prefix is hashed whole.
        const std::string other = "{" + shots;
        EXPECT_EQ(hasher.hex(other), sha256_hex(other)) << cut;
        // The same hasher again, so a state left behind would show.
        EXPECT_EQ(hasher.hex(prefix + "7"), sha256_hex(prefix + "7")) << cut;
    }
}

} // namespace
} // namespace diffeval::util
