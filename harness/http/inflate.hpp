// Response bodies a server compressed with gzip or deflate, decoded as they
// arrive, the same way on both of MultiClient's paths: the Beast client's
// (plain_client.cpp) and libcurl's (client.cpp), which hands diffeval the
// bytes as sent (CURLOPT_HTTP_CONTENT_DECODING off) because its own decoder
// takes a compressed stream cut short for a whole one.
#pragma once

#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace diffeval::http::detail {

enum class Encoding { identity, gzip, deflate };

// Decoded bytes per zlib call.
inline constexpr size_t k_inflate_chunk = size_t{16} << 10;

// The words a transfer fails with when its compressed body is not whole.
inline constexpr std::string_view k_not_compressed_data =
    "the response body is not valid gzip or deflate data";
inline constexpr std::string_view k_data_after_end =
    "the response body goes on after the end of its gzip or deflate data";
inline constexpr std::string_view k_cut_short =
    "the response body ends before the end of its gzip or deflate data";

// The encoding a Content-Encoding value names (case and spaces aside), or
// nothing for one diffeval did not ask for (it asks for gzip and deflate).
std::optional<Encoding> encoding_of(std::string_view content_encoding);

// The failure for a Content-Encoding encoding_of() does not take.
std::string unasked_encoding_error(std::string_view content_encoding);

// What of a body may come off the wire: `--max-response-bytes` counts
// decoded bytes, and a compressed body of incompressible text is a little
// longer than the text (gzip's stored blocks: 5 bytes in 64 KiB, and its
// header and trailer), so the wire gets a 64th and 64 KiB more.
uint64_t wire_limit(size_t max_body_bytes);

// A response body's gzip or deflate stream, decoded as it arrives.
class Inflater {
public:
    explicit Inflater(Encoding e) : m_encoding(e) { inflateInit2(&m_z, 15 + 32); }
    ~Inflater() { inflateEnd(&m_z); }
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;

    // Decode `in`, handing each decoded piece to `out`; false when the
    // stream is corrupt, bytes follow its end (`trailing`), or `out`
    // returned false.
    template <class Out> bool feed(std::string_view in, Out&& out) {
        if (m_ended && !in.empty()) {
            m_trailing = true;
            return false;
        }
        m_fed = m_fed || !in.empty();
        m_z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
        m_z.avail_in = static_cast<uInt>(in.size());
        std::array<char, k_inflate_chunk> buf;
        while (m_z.avail_in > 0 && !m_ended) {
            m_z.next_out = reinterpret_cast<Bytef*>(buf.data());
            m_z.avail_out = static_cast<uInt>(buf.size());
            int rc = inflate(&m_z, Z_NO_FLUSH);
            if (rc == Z_DATA_ERROR && m_encoding == Encoding::deflate && m_z.total_out == 0 &&
                !m_raw) {
                // "deflate" servers that send raw deflate without the zlib
                // header, which HTTP asks for (libcurl accepts both).
                m_raw = true;
                inflateReset2(&m_z, -15);
                m_z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
                m_z.avail_in = static_cast<uInt>(in.size());
                continue;
            }
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
                return false;
            }
            const size_t got = buf.size() - m_z.avail_out;
            if (got > 0 && !out(std::string_view(buf.data(), got))) {
                return false;
            }
            m_ended = rc == Z_STREAM_END;
            if (rc == Z_BUF_ERROR && got == 0) {
                break;
            }
        }
        // A second gzip member or junk after the end: decoding only the
        // first would store a part of the body as the whole (libcurl fails
        // such a body too).
        if (m_ended && m_z.avail_in > 0) {
            m_trailing = true;
            return false;
        }
        return true;
    }
    // Why the last feed() failed, unless `out` refused a piece.
    std::string_view feed_error() const {
        return m_trailing ? k_data_after_end : k_not_compressed_data;
    }
    // Whether the body, its message ended, was cut short: bytes came, and the
    // stream did not reach its end, where its check value (gzip's CRC and
    // length, zlib's Adler-32) sits, so what decoded may be a part of the
    // answer, or a changed one. An empty body (a 204, an error without one)
    // is no stream at all.
    bool cut_short() const { return m_fed && !m_ended; }

private:
    z_stream m_z{};
    Encoding m_encoding;
    bool m_raw = false;
    bool m_fed = false;
    bool m_ended = false;
    bool m_trailing = false;
};

} // namespace diffeval::http::detail
