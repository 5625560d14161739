// Lookup over the table CMake generates from the data folders (see
// cmake/embed.cmake); the table itself lives in the generated source.
#include <harness/util/embedded.hpp>

#include <algorithm>

namespace diffeval::util {

struct EmbeddedEntry {
    const char* path;
    const char* data;
    size_t size;
};
extern const EmbeddedEntry k_embedded_files[];
extern const size_t k_embedded_count;

std::optional<std::string_view> embedded_file(std::string_view path) {
    for (size_t i = 0; i < k_embedded_count; ++i) {
        if (path == k_embedded_files[i].path) {
            return std::string_view(k_embedded_files[i].data, k_embedded_files[i].size);
        }
    }
    return std::nullopt;
}

std::vector<std::string> embedded_files_under(std::string_view dir) {
    std::vector<std::string> out;
    for (size_t i = 0; i < k_embedded_count; ++i) {
        std::string_view p = k_embedded_files[i].path;
        if (p.substr(0, dir.size()) == dir) {
            out.emplace_back(p);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace diffeval::util
