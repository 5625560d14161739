// Whole-file reads; see file.hpp.
#include <harness/util/file.hpp>

#include <fstream>
#include <sstream>

namespace diffeval::util {

std::optional<std::string> read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        return std::nullopt;
    }
    return std::move(text).str();
}

} // namespace diffeval::util
