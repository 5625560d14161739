// Downloading the official GSM8K files. Each file goes to a temporary name,
// is checked against its published sha256, then renamed into place, so the
// cache never holds a partial or altered file.
#include <datasets/dataset.hpp>

#include <harness/http/client.hpp>
#include <harness/util/file.hpp>
#include <harness/util/hash.hpp>

#include <fmt/format.h>

namespace diffeval::datasets {

namespace fs = std::filesystem;
using util::ErrorKind;
using util::make_error;

namespace {

// Each official file not already present and verified into `dir`.
util::Result<void> download(const fs::path& dir, const std::string& url_base,
                            std::vector<std::string>& log) {
    std::string base = url_base;
    while (!base.empty() && base.back() == '/') {
        base.pop_back();
    }
    for (const auto& f : k_gsm8k_files) {
        auto target = dir / f.name;
        if (auto existing = util::read_file(target);
            existing && util::sha256_hex(*existing) == f.sha256) {
            log.push_back(fmt::format("{}: already present and verified", f.name));
            continue;
        }
        http::Request req;
        req.url = fmt::format("{}/{}", base, f.name);
        req.timeout = std::chrono::milliseconds(300'000);
        auto r = http::fetch(req);
        if (r.transport == http::Transport::too_large) {
            // The transport's words name `run`'s --max-response-bytes, which
            // data fetch does not take (interop audit #10).
            return make_error(ErrorKind::io,
                              fmt::format("cannot download {}: it passed {} bytes, far more than "
                                          "GSM8K's files; check --data-url-base",
                                          http::url_without_secret(req.url), req.max_body_bytes));
        }
        if (r.transport != http::Transport::ok) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot download {}: {}; check the network "
                                          "or pass --data-url-base",
                                          http::url_without_secret(req.url), r.transport_error));
        }
        if (r.status != 200) {
            return make_error(
                ErrorKind::io,
                fmt::format("cannot download {}: HTTP {}{}", http::url_without_secret(req.url),
                            r.status,
                            r.status >= 300 && r.status < 400
                                ? " (a redirect, which data fetch does not follow: give the "
                                  "address it leads to as --data-url-base)"
                                : ""));
        }
        auto got = util::sha256_hex(r.body);
        if (got != f.sha256) {
            return make_error(ErrorKind::data,
                              fmt::format("{} has sha256 {}, expected {}; the source is not the "
                                          "official GSM8K file",
                                          http::url_without_secret(req.url), got, f.sha256));
        }
        // A name of its own beside the target (util::ReplacingFile): two
        // fetches into one cache at once (two CI jobs) each rename a whole
        // file into place, where a shared ".part" let one rename a file the
        // other was still truncating and writing.
        auto out = util::ReplacingFile::create(target.string());
        if (!out) {
            return out.error();
        }
        if (!out->write(r.body)) {
            return make_error(ErrorKind::io, fmt::format("cannot write {}", target.string()));
        }
        if (auto done = out->commit(); !done) {
            return done.error();
        }
        log.push_back(fmt::format("{}: downloaded and verified ({} bytes)", f.name, r.body.size()));
    }
    return {};
}

} // namespace

util::Result<fs::path> fetch_gsm8k(const std::string& url_base, std::vector<std::string>& log) {
    const auto root = cache_dir();
    auto dir = root / "gsm8k";
    std::error_code ec;
    const bool had_root = fs::exists(root, ec);
    const bool had_dir = fs::exists(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) {
        return make_error(ErrorKind::usage,
                          fmt::format("cannot create {}: {}; set DIFFEVAL_DATA to a "
                                      "writable directory",
                                      dir.string(), ec.message()));
    }
    // A directory where a file goes is the user's to remove, said before
    // anything is downloaded (it was a failed download's exit 1, after it).
    for (const auto& f : k_gsm8k_files) {
        if (fs::is_directory(dir / f.name, ec)) {
            return make_error(ErrorKind::usage,
                              fmt::format("{} is a directory, where data fetch writes the file "
                                          "{}; remove it, or set DIFFEVAL_DATA to another "
                                          "directory",
                                          (dir / f.name).string(), f.name));
        }
    }
    if (auto done = download(dir, url_base, log); !done) {
        // A failed fetch leaves the cache as it found it: no empty
        // directory of its own making (fs::remove removes only an empty one).
        if (!had_dir) {
            fs::remove(dir, ec);
        }
        if (!had_root) {
            fs::remove(root, ec);
        }
        return done.error();
    }
    return dir;
}

} // namespace diffeval::datasets
