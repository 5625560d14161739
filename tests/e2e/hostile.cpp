// The hostile server; see hostile.hpp.
#include "hostile.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace e2e {

namespace {

using Clock = std::chrono::steady_clock;

// No connection lives longer than this, whatever its mode.
constexpr auto k_connection_deadline = std::chrono::seconds(20);
constexpr const char* k_good_text = "The answer is 42.\\n#### 42";

std::string json_text(bool chat, const std::string& value_json) {
    if (chat) {
        return R"({"id":"h","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":)" +
               value_json +
               R"(},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":7}})";
    }
    return R"({"id":"h","object":"text_completion","choices":[{"index":0,"text":)" + value_json +
           R"(,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":7}})";
}

std::string chunk(bool chat, const std::string& piece_json, const std::string& finish = "null") {
    std::string choice = chat ? R"({"index":0,"delta":{"content":)" + piece_json + "}"
                              : R"({"index":0,"text":)" + piece_json;
    return "data: {\"choices\":[" + choice + ",\"finish_reason\":" + finish + "}]}\n\n";
}

std::string head(int status, const std::string& reason, const std::string& extra,
                 const std::string& body, bool length = true) {
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" + extra;
    if (length) {
        h += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    return h + "Connection: close\r\n\r\n" + body;
}

std::string json_response(int status, const std::string& body, const std::string& extra = "") {
    return head(status, status == 200 ? "OK" : "Hostile",
                "Content-Type: application/json\r\n" + extra, body);
}

std::string sse_response(const std::string& events) {
    return head(200, "OK", "Content-Type: text/event-stream\r\n", events, false);
}

std::string escape_json(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

// 256 MiB of 'A' gzip-compressed (about 256 KiB), made once.
const std::string& gzip_bomb() {
    static const std::string bomb = [] {
        z_stream z{};
        deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
        std::string in(1 << 20, 'A');
        std::string out;
        char buf[1 << 16];
        for (int i = 0; i < 256; ++i) {
            z.next_in = reinterpret_cast<Bytef*>(in.data());
            z.avail_in = static_cast<uInt>(in.size());
            int flush = i == 255 ? Z_FINISH : Z_NO_FLUSH;
            do {
                z.next_out = reinterpret_cast<Bytef*>(buf);
                z.avail_out = sizeof buf;
                deflate(&z, flush);
                out.append(buf, sizeof buf - z.avail_out);
            } while (z.avail_out == 0);
        }
        deflateEnd(&z);
        return out;
    }();
    return bomb;
}

// `data` as one gzip member.
std::string gzip(const std::string& data) {
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(out.size() - z.avail_out);
    deflateEnd(&z);
    return out;
}

bool send_all(int fd, const std::string& data, Clock::time_point deadline) {
    size_t off = 0;
    while (off < data.size()) {
        if (Clock::now() > deadline) {
            return false;
        }
        pollfd p{fd, POLLOUT, 0};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        off += static_cast<size_t>(n);
    }
    return true;
}

struct Parsed {
    std::string method, path, headers, body;
};

// Read one request (head and Content-Length body); false on EOF or junk.
bool read_request(int fd, Parsed& r, const std::atomic<bool>& stop, Clock::time_point deadline) {
    std::string data;
    char buf[8192];
    size_t head_end = std::string::npos;
    size_t need = 0;
    for (;;) {
        if (head_end == std::string::npos) {
            head_end = data.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                r.headers = data.substr(0, head_end);
                auto sp = r.headers.find(' ');
                auto sp2 = r.headers.find(' ', sp + 1);
                r.method = r.headers.substr(0, sp);
                r.path = r.headers.substr(sp + 1, sp2 - sp - 1);
                auto cl = r.headers.find("Content-Length: ");
                need = cl == std::string::npos
                           ? 0
                           : std::strtoul(r.headers.c_str() + cl + 16, nullptr, 10);
            }
        }
        if (head_end != std::string::npos && data.size() >= head_end + 4 + need) {
            r.body = data.substr(head_end + 4, need);
            return true;
        }
        if (stop.load() || Clock::now() > deadline || data.size() > (1 << 22)) {
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            return false;
        }
        data.append(buf, static_cast<size_t>(n));
    }
}

} // namespace

std::string name_of(Hostile m) {
    static const char* names[] = {"good",
                                  "cut_mid_event",
                                  "no_finish",
                                  "content_number",
                                  "content_object",
                                  "content_null",
                                  "message_empty",
                                  "deep_json",
                                  "gzip_bomb",
                                  "endless",
                                  "redirect_away",
                                  "redirect_ftp",
                                  "redirect_loop",
                                  "echo_headers",
                                  "echo_headers_503",
                                  "retry_after_huge",
                                  "retry_after_nan",
                                  "bad_tokens",
                                  "partial_206",
                                  "huge_header",
                                  "huge_trailer",
                                  "finish_abort",
                                  "done_then_hold",
                                  "echo_key_split",
                                  "hang",
                                  "key_after_done",
                                  "key_cut",
                                  "error_line",
                                  "object_error",
                                  "chat_shaped",
                                  "stop_reason_true",
                                  "probe_error",
                                  "gzip_members",
                                  "close_after_read",
                                  "oversize_503",
                                  "stray_after",
                                  "done_then_drop",
                                  "reset_after_read",
                                  "echo_key_other_shape"};
    return names[static_cast<int>(m)];
}

struct HostileServer::Impl {
    Options options;
    int listen_fd = -1;
    int port = 0;
    std::atomic<bool> stop{false};
    std::thread acceptor;
    mutable std::mutex mutex;
    std::condition_variable idle;
    std::set<int> open_fds;
    int active = 0;
    int accepted = 0;
    int posts = 0;
    std::map<std::string, int> arrivals;
    std::map<std::string, int> per_body;
    std::string last_headers;
    std::atomic<int>* models = nullptr;
    std::atomic<int> probe_errors{0};

    void serve(int fd);
    std::string answer(Hostile mode, const Parsed& r, bool chat, bool stream, int fd,
                       Clock::time_point deadline);
};

std::string HostileServer::Impl::answer(Hostile mode, const Parsed& r, bool chat, bool stream,
                                        int fd, Clock::time_point deadline) {
    const std::string good = std::string("\"") + k_good_text + "\"";
    auto good_stream = [&](const std::string& usage) {
        return chunk(chat, "\"The answer\"") + chunk(chat, "\" is 42.\\n#### 42\"") +
               chunk(chat, "\"\"", "\"stop\"") + "data: {\"choices\":[],\"usage\":" + usage +
               "}\n\ndata: [DONE]\n\n";
    };
    const std::string usage = R"({"prompt_tokens":10,"completion_tokens":7})";
    // The last chunk carries only the finish_reason, so the value under
    // test is the only content the stream has.
    const std::string finish = std::string("data: {\"choices\":[{\"index\":0,") +
                               (chat ? "\"delta\":{}," : "") +
                               "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    auto typed = [&](const std::string& value) {
        if (stream) {
            return sse_response(chunk(chat, value) + finish);
        }
        return json_response(200, json_text(chat, value));
    };
    switch (mode) {
    case Hostile::good:
    case Hostile::stray_after: // serve() adds the stray
        return stream ? sse_response(good_stream(usage))
                      : json_response(200, json_text(chat, good));
    case Hostile::cut_mid_event:
        if (stream) {
            return sse_response(chunk(chat, "\"Let me compute. \"") +
                                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"6 * ");
        }
        return head(200, "OK", "Content-Type: application/json\r\n",
                    json_text(chat, good).substr(0, 60), true);
    case Hostile::no_finish:
        if (stream) {
            return sse_response(chunk(chat, "\"Let me compute. \"") + chunk(chat, "\"6 * \""));
        }
        return json_response(200, json_text(chat, "\"Let me compute. 6 * \"").substr(0, 70));
    case Hostile::content_number:
        return typed("42");
    case Hostile::content_object:
        return typed(R"({"text":"The answer is 42."})");
    case Hostile::content_null:
        return typed("null");
    case Hostile::message_empty:
        if (stream) {
            return sse_response(
                "data: {\"choices\":[{\"index\":0,\"delta\":[],\"text\":[]}]}\n\ndata: [DONE]\n\n");
        }
        return json_response(200, chat ? R"({"choices":[{"index":0,"message":{}}]})"
                                       : R"({"choices":[{"index":0}]})");
    case Hostile::deep_json: {
        std::string deep(100'000, '[');
        deep += std::string(100'000, ']');
        return stream ? sse_response("data: " + deep + "\n\n") : json_response(200, deep);
    }
    case Hostile::gzip_bomb:
        return head(200, "OK", "Content-Type: application/json\r\nContent-Encoding: gzip\r\n",
                    gzip_bomb());
    case Hostile::endless: {
        // Headers, then the same block until the client hangs up; bounded
        // by the connection deadline and 2 GiB.
        if (!send_all(fd, head(200, "OK", "Content-Type: application/json\r\n", "", false),
                      deadline)) {
            return "";
        }
        std::string block(1 << 16, ' ');
        for (int i = 0; i < 32768 && !stop.load(); ++i) {
            if (!send_all(fd, block, deadline)) {
                break;
            }
        }
        return "";
    }
    case Hostile::redirect_away:
        return json_response(307, "{}", "Location: " + options.redirect_url + r.path + "\r\n");
    case Hostile::redirect_ftp:
        return json_response(307, "{}",
                             "Location: ftp://127.0.0.1:" + std::to_string(port) + "/x\r\n");
    case Hostile::redirect_loop:
        return json_response(307, "{}", "Location: " + r.path + "\r\n");
    case Hostile::echo_headers: {
        const std::string echoed =
            "\"" + escape_json("You sent:\n" + r.headers + "\n") + std::string(k_good_text) + "\"";
        if (stream) {
            return sse_response(chunk(chat, echoed) + chunk(chat, "\"\"", "\"stop\"") +
                                "data: [DONE]\n\n");
        }
        return json_response(200, json_text(chat, echoed));
    }
    case Hostile::echo_headers_503: {
        std::string bearer;
        if (auto at = r.headers.find("Bearer "); at != std::string::npos) {
            bearer = r.headers.substr(at, r.headers.find("\r\n", at) - at);
        }
        return json_response(503, R"({"error":{"message":")" +
                                      escape_json(std::string(130, '.') + bearer) + "\"}}");
    }
    case Hostile::echo_key_split:
    case Hostile::echo_key_other_shape: {
        std::string key;
        if (auto at = r.headers.find("Bearer "); at != std::string::npos) {
            key = r.headers.substr(at + 7, r.headers.find("\r\n", at) - at - 7);
        }
        if (key.size() < 16) {
            return json_response(400, R"({"error":{"message":"send a key of 16 or more"}})");
        }
        if (mode == Hostile::echo_key_other_shape) {
            return json_response(200, json_text(!chat, "\"The key is \\u0073\\u006B" +
                                                           escape_json(key.substr(2)) +
                                                           ".\\n#### 42\""));
        }
        auto q = [](const std::string& s) { return "\"" + escape_json(s) + "\""; };
        if (!stream) {
            return json_response(200,
                                 json_text(chat, "\"The key is \\u0073\\u006B" +
                                                     escape_json(key.substr(2)) + ".\\n#### 42\""));
        }
        if (!chat) {
            return sse_response(chunk(chat, q("The key is " + key.substr(0, 5))) +
                                chunk(chat, q(key.substr(5, 6))) +
                                chunk(chat, q(key.substr(11) + ".\n#### 42"), "\"stop\"") +
                                "data: [DONE]\n\n");
        }
        auto reasoning = [&](const std::string& piece) {
            return "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":" + q(piece) +
                   "},\"finish_reason\":null}]}\n\n";
        };
        std::string escaped; // every character as \u00XX, in upper case hex
        for (char c : key.substr(7, 5)) {
            static const char* hex = "0123456789ABCDEF";
            escaped += std::string("\\u00") + hex[(c >> 4) & 15] + hex[c & 15];
        }
        return sse_response(reasoning("I saw " + key.substr(0, 4)) + reasoning(key.substr(4, 8)) +
                            reasoning(key.substr(12) + " in the headers") +
                            chunk(chat, q("The key is " + key.substr(0, 7))) +
                            chunk(chat,
                                  "\"" + escaped + escape_json(key.substr(12)) + ".\\n#### 42\"",
                                  "\"stop\"") +
                            "data: [DONE]\n\n");
    }
    case Hostile::key_after_done:
    case Hostile::key_cut: {
        std::string key;
        if (auto at = r.headers.find("Bearer "); at != std::string::npos) {
            key = r.headers.substr(at + 7, r.headers.find("\r\n", at) - at - 7);
        }
        if (key.size() < 16) {
            return json_response(400, R"({"error":{"message":"send a key of 16 or more"}})");
        }
        auto q = [](const std::string& s) { return "\"" + escape_json(s) + "\""; };
        if (mode == Hostile::key_after_done) {
            if (!stream) {
                return json_response(200, json_text(chat, good));
            }
            return sse_response(chunk(chat, q("The answer is 42.\n#### 42 " + key.substr(0, 8))) +
                                chunk(chat, "\"\"", "\"stop\"") + "data: [DONE]\n\n" +
                                chunk(chat, q(key.substr(8, 8))) + chunk(chat, q(key.substr(16))));
        }
        std::string start;
        if (stream) {
            start = chunk(chat, q("The key is " + key.substr(0, 10))) +
                    "data: {\"choices\":[{\"index\":0," +
                    (chat ? "\"delta\":{\"content\"" : "\"text\"") + ":\"" +
                    escape_json(key.substr(10, 6));
        } else {
            start = json_text(chat, q("The key is " + key));
            start.resize(start.find(key) + 12);
        }
        std::ostringstream size;
        size << std::hex << start.size();
        send_all(fd,
                 std::string("HTTP/1.1 200 OK\r\nContent-Type: ") +
                     (stream ? "text/event-stream" : "application/json") +
                     "\r\nTransfer-Encoding: chunked\r\n\r\n" + size.str() + "\r\n" + start +
                     "\r\n",
                 deadline);
        return answer(Hostile::hang, r, chat, stream, fd, deadline);
    }
    case Hostile::error_line: {
        const std::string error =
            R"({"code":500,"message":"Invalid input batch.","type":"server_error"})";
        if (!stream) {
            return json_response(500, R"({"error":)" + error + "}");
        }
        return sse_response(chunk(chat, "\"The answer is\"") + "error: " + error +
                            "\n\ndata: [DONE]\n\n");
    }
    case Hostile::object_error: {
        const std::string error =
            R"({"object":"error","message":"engine dead","type":"InternalServerError","code":500})";
        if (!stream) {
            return json_response(200, error);
        }
        return sse_response(chunk(chat, "\"The answer is\"") + "data: " + error +
                            "\n\ndata: [DONE]\n\n");
    }
    case Hostile::chat_shaped:
        if (!stream) {
            return json_response(200, json_text(true, good));
        }
        return sse_response(chunk(true, good) + chunk(true, "\"\"", "\"stop\"") +
                            "data: [DONE]\n\n");
    case Hostile::stop_reason_true: {
        if (stream) {
            return sse_response(chunk(chat, good) +
                                "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"delta\":{},"
                                "\"finish_reason\":\"stop\",\"stop_reason\":true}]}\n\n"
                                "data: [DONE]\n\n");
        }
        auto body = json_text(chat, good);
        body.replace(body.find("\"finish_reason\":\"stop\""), 22,
                     "\"finish_reason\":\"stop\",\"stop_reason\":true");
        return json_response(200, body);
    }
    case Hostile::probe_error: {
        if (r.body.find("\"max_tokens\": 1,") == std::string::npos &&
            r.body.find("\"max_tokens\": 1}") == std::string::npos) {
            return answer(Hostile::good, r, chat, stream, fd, deadline);
        }
        static const char* bodies[] = {R"({"error":{"message":"CUDA out of memory","code":500}})",
                                       "[]", "42"};
        return json_response(200, bodies[probe_errors.fetch_add(1) % 3]);
    }
    case Hostile::gzip_members:
        return head(200, "OK", "Content-Type: application/json\r\nContent-Encoding: gzip\r\n",
                    gzip(json_text(chat, good)) + gzip(R"({"error":"second member"})"));
    case Hostile::close_after_read:
    case Hostile::reset_after_read:
        return "";
    case Hostile::oversize_503:
        return json_response(503, R"({"error":{"message":")" + std::string(200'000, 'x') + "\"}}",
                             "Retry-After: 0\r\n");
    case Hostile::retry_after_huge:
        return json_response(429, R"({"error":{"message":"slow down"}})", "Retry-After: 1e308\r\n");
    case Hostile::retry_after_nan:
        return json_response(429, R"({"error":{"message":"slow down"}})", "Retry-After: nan\r\n");
    case Hostile::bad_tokens: {
        const std::string bad = R"({"prompt_tokens":18446744073709551615,"completion_tokens":-5})";
        if (stream) {
            return sse_response(good_stream(bad));
        }
        auto body = json_text(chat, good);
        body.replace(body.find(usage), usage.size(), bad);
        return json_response(200, body);
    }
    case Hostile::partial_206:
        return head(206, "Partial Content", "Content-Type: application/json\r\n",
                    json_text(chat, good));
    case Hostile::huge_header:
        return json_response(200, json_text(chat, good),
                             "X-Big: " + std::string(70'000, 'a') + "\r\n");
    case Hostile::finish_abort: {
        auto body = json_text(chat, good);
        body.replace(body.find("\"finish_reason\":\"stop\""), 22, "\"finish_reason\":\"abort\"");
        return json_response(200, body);
    }
    case Hostile::huge_trailer: {
        const auto body = json_text(chat, good);
        std::ostringstream size;
        size << std::hex << body.size();
        return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
               "chunked\r\nConnection: close\r\n\r\n" +
               size.str() + "\r\n" + body + "\r\n0\r\nX-Trailer: " + std::string(70'000, 'a') +
               "\r\n\r\n";
    }
    case Hostile::done_then_hold:
    case Hostile::done_then_drop: {
        // A whole answer and [DONE] in one chunk, and no last chunk.
        const auto events = good_stream(usage);
        std::ostringstream size;
        size << std::hex << events.size();
        send_all(fd,
                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
                 "chunked\r\n\r\n" +
                     size.str() + "\r\n" + events + "\r\n",
                 deadline);
        // Then nothing, or (an empty reply) serve() closes the connection.
        return mode == Hostile::done_then_hold
                   ? answer(Hostile::hang, r, chat, stream, fd, deadline)
                   : std::string();
    }
    case Hostile::hang:
        while (!stop.load() && Clock::now() < deadline) {
            char c;
            if (recv(fd, &c, 1, MSG_DONTWAIT) == 0) {
                break; // the client hung up
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return "";
    }
    return "";
}

void HostileServer::Impl::serve(int fd) {
    const auto deadline = Clock::now() + k_connection_deadline;
    for (Parsed r; read_request(fd, r, stop, deadline); r = Parsed{}) {
        if (r.method == "GET") {
            models->fetch_add(1);
            if (options.models == ModelsReply::deep) {
                std::string deep = "{\"data\":";
                deep += std::string(100'000, '[') + std::string(100'000, ']') + "}";
                send_all(fd, json_response(200, deep), deadline);
            } else if (options.models == ModelsReply::loading) {
                send_all(fd,
                         json_response(503, R"({"error":{"code":503,"message":"Loading model",)"
                                            R"("type":"unavailable_error"}})"),
                         deadline);
            } else if (options.models == ModelsReply::echo_error) {
                send_all(fd,
                         json_response(500, "{\"error\":{\"message\":\"bad request: " +
                                                escape_json(r.headers) + "\"}}"),
                         deadline);
            } else if (options.models == ModelsReply::props_deep && r.path == "/props") {
                std::string deep = "{\"total_slots\":4,\"x\":";
                deep += std::string(300'000, '[') + std::string(300'000, ']') + "}";
                send_all(fd, json_response(200, deep), deadline);
            } else if (options.models == ModelsReply::props_huge_slots && r.path == "/props") {
                send_all(fd, json_response(200, R"({"total_slots":4294967296})"), deadline);
            } else if (options.models == ModelsReply::echo_id) {
                std::string id;
                if (auto at = r.headers.find("Authorization: "); at != std::string::npos) {
                    at += 15;
                    id = r.headers.substr(at, r.headers.find('\r', at) - at);
                }
                send_all(fd,
                         json_response(200, "{\"object\":\"list\",\"data\":[{\"id\":\"" +
                                                escape_json(id) + "\",\"object\":\"model\"}]}"),
                         deadline);
            } else if (options.models == ModelsReply::hang) {
                answer(Hostile::hang, r, false, false, fd, deadline);
            } else {
                const std::string server = options.models == ModelsReply::server_bad_utf8
                                               ? "Server: \xff\xfe-srv\r\n"
                                               : "";
                send_all(fd,
                         json_response(
                             200, R"({"object":"list","data":[{"id":"hostile","object":"model"}]})",
                             server),
                         deadline);
            }
        } else {
            Hostile mode;
            {
                std::lock_guard lock(mutex);
                int seen = per_body[r.body]++;
                mode = options.hostile_arrivals_per_body > 0 &&
                               seen >= options.hostile_arrivals_per_body
                           ? Hostile::good
                           : options.cycle[static_cast<size_t>(posts) % options.cycle.size()];
                ++posts;
                ++arrivals[name_of(mode)];
                last_headers = r.headers;
            }
            const bool chat = r.path.find("/chat/") != std::string::npos;
            const bool stream = r.body.find("\"stream\": true") != std::string::npos;
            auto reply = answer(mode, r, chat, stream, fd, deadline);
            if (options.close_after_stream && stream && mode == Hostile::good) {
                const auto events = reply.substr(reply.find("\r\n\r\n") + 4);
                std::ostringstream size;
                size << std::hex << events.size();
                send_all(fd,
                         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
                         "chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n" +
                             size.str() + "\r\n" + events + "\r\n0\r\n\r\n",
                         deadline);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                break;
            }
            if (options.keep_alive) {
                if (auto at = reply.find("Connection: close\r\n"); at != std::string::npos) {
                    reply.erase(at, 19);
                }
            }
            // The stray in the same write as the answer: they arrive together.
            if (mode == Hostile::stray_after) {
                auto stray = json_response(200, json_text(chat, "\"STRAY #### 7\""));
                if (auto at = stray.find("Connection: close\r\n"); at != std::string::npos) {
                    stray.erase(at, 19);
                }
                reply += stray;
            }
            if (mode == Hostile::reset_after_read) {
                // No FIN first (the end below): the caller's close resets.
                const linger now{1, 0};
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
                return;
            }
            send_all(fd, reply, deadline);
            if (reply.empty()) {
                break;
            }
            if (options.close_after_answer && !stream && mode == Hostile::good) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                break;
            }
        }
        if (!options.keep_alive || r.method == "GET") {
            break;
        }
    }
    shutdown(fd, SHUT_WR);
    // Let the client read to the end before the socket goes.
    char buf[256];
    while (Clock::now() < deadline && !stop.load()) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0 && recv(fd, buf, sizeof buf, 0) <= 0) {
            break;
        }
        if (p.revents == 0) {
            break;
        }
    }
}

HostileServer::HostileServer(Options options) : m_impl(std::make_unique<Impl>()) {
    m_impl->options = std::move(options);
    m_impl->models = &m_models;
    m_impl->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(m_impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(m_impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(m_impl->listen_fd, 512) != 0) {
        throw std::runtime_error("hostile server: cannot listen on loopback");
    }
    socklen_t len = sizeof addr;
    getsockname(m_impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    m_port = ntohs(addr.sin_port);
    m_impl->port = m_port;
    Impl* impl = m_impl.get();
    m_impl->acceptor = std::thread([impl] {
        while (!impl->stop.load()) {
            pollfd p{impl->listen_fd, POLLIN, 0};
            if (poll(&p, 1, 50) <= 0) {
                continue;
            }
            int fd = accept4(impl->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                continue;
            }
            {
                std::lock_guard lock(impl->mutex);
                impl->open_fds.insert(fd);
                ++impl->active;
                ++impl->accepted;
            }
            std::thread([impl, fd] {
                impl->serve(fd);
                std::lock_guard lock(impl->mutex);
                impl->open_fds.erase(fd);
                close(fd);
                --impl->active;
                impl->idle.notify_all();
            }).detach();
        }
    });
}

HostileServer::~HostileServer() {
    m_impl->stop.store(true);
    m_impl->acceptor.join();
    close(m_impl->listen_fd);
    std::unique_lock lock(m_impl->mutex);
    for (int fd : m_impl->open_fds) {
        shutdown(fd, SHUT_RDWR);
    }
    m_impl->idle.wait(lock, [&] { return m_impl->active == 0; });
}

std::string HostileServer::url() const {
    return "http://127.0.0.1:" + std::to_string(m_port);
}

std::map<std::string, int> HostileServer::arrivals() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->arrivals;
}

int HostileServer::connections() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->accepted;
}

int HostileServer::total_arrivals() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->posts;
}

std::string HostileServer::last_headers() const {
    std::lock_guard lock(m_impl->mutex);
    return m_impl->last_headers;
}

} // namespace e2e
