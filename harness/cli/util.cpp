// Shared CLI helpers; see util.hpp.
#include <harness/cli/util.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <unistd.h>

namespace diffeval::cli {

std::vector<std::string> split_list(const std::vector<std::string>& values) {
    std::vector<std::string> out;
    for (const auto& v : values) {
        size_t start = 0;
        while (start <= v.size()) {
            auto comma = v.find(',', start);
            auto item =
                v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            if (!item.empty()) {
                out.push_back(item);
            }
            if (comma == std::string::npos) {
                break;
            }
            start = comma + 1;
        }
    }
    return out;
}

int report(const util::Error& error) {
    std::cerr << "diffeval: " << error.message << "\n";
    switch (error.kind) {
    case util::ErrorKind::usage:
    case util::ErrorKind::data:
        return k_exit_usage;
    default:
        return k_exit_failed;
    }
}

util::Result<std::unique_ptr<store::Store>> open_existing_store(const std::string& db) {
    if (!std::filesystem::exists(db)) {
        return util::make_error(
            util::ErrorKind::usage,
            fmt::format("no database {}; run 'diffeval run --db {}' first", db, db));
    }
    // Opening for writing would create the schema in an empty file; a
    // command that only reads results must leave it as it found it.
    std::error_code ec;
    if (std::filesystem::is_regular_file(db, ec) && std::filesystem::file_size(db, ec) == 0) {
        return util::make_error(util::ErrorKind::usage,
                                fmt::format("{} holds no responses (an empty file, left as it "
                                            "is); run 'diffeval run --db {}' first",
                                            db, db));
    }
    return store::Store::open(db, store::Store::Mode::read_write);
}

util::Result<OpenResults> open_results(const std::string& db) {
    auto st = open_existing_store(db);
    if (!st) {
        return st.error();
    }
    auto results = analysis::load_results(**st);
    if (!results) {
        return results.error();
    }
    return OpenResults{std::move(*st), std::move(*results)};
}

bool stderr_is_tty() {
    return isatty(STDERR_FILENO) == 1;
}

} // namespace diffeval::cli
