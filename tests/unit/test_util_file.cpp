// Whole-file reads: every byte of a regular file whatever its size against
// the read's blocks, a file whose reported size is not what it holds, and a
// missing file.
#include <harness/util/file.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace diffeval;

namespace {

std::filesystem::path temp_file(const std::string& name, const std::string& bytes) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("diffeval-unit-file-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

} // namespace

TEST(ReadFile, ReturnsEveryByteWhateverTheSizeAgainstItsBlocks) {
    // Around the 1 MiB block and the reserved size: one short, exact, one over.
    for (const size_t size : {size_t{0}, size_t{1}, (size_t{1} << 20) - 1, size_t{1} << 20,
                              (size_t{1} << 20) + 1, size_t{3} * (1 << 20) + 12345}) {
        std::string bytes(size, '\0');
        for (size_t i = 0; i < size; ++i) {
            bytes[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
        }
        const auto path = temp_file(std::to_string(size), bytes);
        const auto read = util::read_file(path);
        std::filesystem::remove(path);
        ASSERT_TRUE(read.has_value()) << size;
        EXPECT_EQ(read->size(), size);
        EXPECT_TRUE(*read == bytes) << size;
    }
}

TEST(ReadFile, ReadsToTheEndWhenTheReportedSizeIsWrong) {
    // /proc files report a size of 0 and hold more.
    const auto read = util::read_file("/proc/self/status");
    ASSERT_TRUE(read.has_value());
    EXPECT_NE(read->find("Name:"), std::string::npos);
}

TEST(ReadFile, AMissingFileIsNoText) {
    EXPECT_FALSE(util::read_file("/nonexistent/diffeval-unit-file").has_value());
}
