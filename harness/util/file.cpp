// Whole-file reads; see file.hpp.
#include <harness/util/file.hpp>

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
    constexpr size_t k_block = 1 << 20;
    size_t used = 0;
    for (;;) {
        text.resize(used + k_block);
        in.read(text.data() + used, static_cast<std::streamsize>(k_block));
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

} // namespace diffeval::util
