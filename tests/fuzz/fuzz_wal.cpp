// libFuzzer target: the -wal read before a database is opened (wal_fit.cpp).
// Whatever bytes lie beside a database as its log, reading them ends, and
// says "does not fit" exactly when SQLite would count a commit that shrinks
// the database without rewriting it whole, as only a VACUUM shrinks it (or
// a log of other pages).
//
// Input: a flags byte, then the log. With bit 0 set the log's header and
// every whole frame get the checksums and salts SQLite would have written,
// so the fuzzer reaches the frames past the checks; bit 1 picks the
// checksums' byte order. The database beside it is 8 pages of 4096 bytes.
#include <harness/store/wal_fit.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

using namespace diffeval::store;

namespace {

constexpr uint32_t k_db_pages = 8;
constexpr uint32_t k_db_page = 4096;

uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void put32(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24);
    p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8);
    p[3] = static_cast<uint8_t>(v);
}

void checksum(const uint8_t* p, size_t n, bool big, std::array<uint32_t, 2>& s) {
    for (size_t at = 0; at + 8 <= n; at += 8) {
        const auto word = [&](size_t k) {
            return big ? be32(p + k)
                       : (uint32_t{p[k + 3]} << 24) | (uint32_t{p[k + 2]} << 16) |
                             (uint32_t{p[k + 1]} << 8) | uint32_t{p[k]};
        };
        s[0] += word(at) + s[1];
        s[1] += word(at + 4) + s[0];
    }
}

const std::string& db_path() {
    static const std::string path = [] {
        auto p = (std::filesystem::temp_directory_path() /
                  ("fuzz_wal_" + std::to_string(::getpid()) + ".sqlite"))
                     .string();
        std::vector<char> bytes(size_t{k_db_pages} * k_db_page, 0);
        const std::string magic("SQLite format 3", 16);
        std::copy(magic.begin(), magic.end(), bytes.begin());
        bytes[16] = static_cast<char>(k_db_page >> 8);
        bytes[17] = static_cast<char>(k_db_page & 0xff);
        std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
        return p;
    }();
    return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const uint8_t flags = data[0];
    std::vector<uint8_t> wal(data + 1, data + size);
    // What SQLite would count, when the frames are made valid here: whether
    // anything is committed, and whether a commit shrinks the database (below
    // the last commit, or the file for the first) without rewriting pages 1
    // to its size, as a VACUUM does.
    uint32_t committed = 0;
    uint32_t page = 0;
    bool shrunk_in_part = false;
    std::set<uint32_t> pages;
    uint64_t before = k_db_pages;
    if ((flags & 1) != 0 && wal.size() >= 32) {
        const bool big = (flags & 2) != 0;
        put32(wal.data(), big ? 0x377f0683 : 0x377f0682);
        // A page size of 512 to 65536 bytes, from the input's choice.
        page = 512u << (wal[8] % 8);
        put32(wal.data() + 8, page);
        std::array<uint32_t, 2> s{};
        checksum(wal.data(), 24, big, s);
        put32(wal.data() + 24, s[0]);
        put32(wal.data() + 28, s[1]);
        for (size_t at = 32; at + 24 + page <= wal.size(); at += 24 + page) {
            std::copy(wal.begin() + 16, wal.begin() + 24, wal.begin() + static_cast<long>(at) + 8);
            checksum(wal.data() + at, 8, big, s);
            checksum(wal.data() + at + 24, page, big, s);
            put32(wal.data() + at + 16, s[0]);
            put32(wal.data() + at + 20, s[1]);
            pages.insert(be32(wal.data() + at));
            if (const uint32_t n = be32(wal.data() + at + 4); n != 0) {
                const bool whole = pages.size() == n && *pages.begin() == 1 && *pages.rbegin() == n;
                shrunk_in_part = shrunk_in_part || (n < before && !whole);
                before = n;
                committed = n;
                pages.clear();
            }
        }
    }
    const auto& db = db_path();
    std::ofstream(db + "-wal", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(wal.data()), static_cast<long>(wal.size()));
    const auto why = log_that_does_not_fit(db);
    if ((flags & 1) != 0 && wal.size() >= 32) {
        const bool should = committed != 0 && (page != k_db_page || shrunk_in_part);
        if (why.has_value() != should) {
            std::abort();
        }
    }
    return 0;
}
