// Whole-file reads; see file.hpp.
#include <harness/util/file.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace diffeval::util {

std::optional<std::string> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    // Read in large blocks into a string grown geometrically: a stream
    // buffer copied into an ostringstream cost 5 ms for the 4 MB train file.
    // The size is not trusted (a pipe or /proc file reports 0 or less than
    // it holds): reading goes on until the end.
    std::string text;
    // The size a regular file reports is room to reserve, so the string is
    // not regrown (and its fresh pages touched again) block by block.
    std::error_code ec;
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size < (size_t{1} << 32)) {
        text.reserve(static_cast<size_t>(size) + 1);
    }
    constexpr size_t k_block = 1 << 20;
    size_t used = 0;
    for (;;) {
        // Within what is reserved while it lasts (its last byte is where the
        // end shows), then a block at a time.
        const size_t room = text.capacity() > used ? text.capacity() - used : 0;
        const size_t want = room > 0 ? std::min(room, k_block) : k_block;
        text.resize(used + want);
        in.read(text.data() + used, static_cast<std::streamsize>(want));
        used += static_cast<size_t>(in.gcount());
        if (!in) {
            break;
        }
    }
    if (in.bad()) {
        return std::nullopt;
    }
    text.resize(used);
    return text;
}

bool may_write(const std::string& path, std::string* error) {
    if (access(path.c_str(), W_OK) != 0) {
        if (error) {
            *error = std::strerror(errno);
        }
        return false;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto perms = fs::status(path, ec).permissions();
    if (!ec && (perms & (fs::perms::owner_write | fs::perms::group_write |
                         fs::perms::others_write)) == fs::perms::none) {
        if (error) {
            *error = "the file is read-only (no write permission for anyone)";
        }
        return false;
    }
    return true;
}

std::string resolved_path(const std::string& path) {
    std::error_code ec;
    auto resolved = std::filesystem::weakly_canonical(path, ec);
    return ec || resolved.empty() ? path : resolved.string();
}

} // namespace diffeval::util
