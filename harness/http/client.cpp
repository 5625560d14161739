// MultiClient, and libcurl's part of it; see client.hpp. Plain http://
// transfers go to PlainMulti (plain_client.hpp), fetch()'s too; https and
// proxied ones to libcurl's multi interface, below, libcurl being loaded the
// first time one comes (curl_api.hpp).
//
// Each libcurl transfer is an easy handle owned by a Transfer; handles are recycled
// so connections stay alive in the multi handle's shared connection pool.
// Sockets are watched with epoll through libcurl's socket interface, so a
// poll costs the sockets that are ready, not every transfer in flight
// (curl_multi_perform and poll() walk all of them on every wake-up).
//
// Timeouts are not left to the timer callback alone: libcurl calls it only
// when its next deadline changes, so a deadline missed once would never be
// announced again. Every poll asks curl_multi_timeout() as well, waits no
// longer than the sooner of the two, and runs libcurl's timers whenever
// either is due or the wait ends with no socket ready.
#include <harness/http/client.hpp>
#include <harness/http/curl_api.hpp>
#include <harness/http/inflate.hpp>
#include <harness/http/plain_client.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/redact.hpp>

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <unordered_map>

namespace diffeval::http {

namespace {

// libcurl's functions; called only where curl_api() has loaded them, so
// the first call finds them and later ones need not ask again.
const detail::CurlApi& lib() {
    static const detail::CurlApi& api = *detail::curl_api().value();
    return api;
}

struct Transfer {
    Request request;
    Response response;
    curl_slist* headers = nullptr;
    char error[CURL_ERROR_SIZE] = {};
    bool too_large = false;
    // The body's decoder when the server compressed it: libcurl hands the
    // bytes as sent (inflate.hpp says why).
    std::unique_ptr<detail::Inflater> inflater;
    uint64_t wire_bytes = 0;  // of the body, as sent
    std::string decode_error; // why the body's encoding ended the transfer
};

// Keep `piece` of the decoded body, or end the transfer (false) when it
// would pass the limit.
bool take(Transfer& t, std::string_view piece) {
    if (piece.size() >
        t.request.max_body_bytes - std::min(t.response.body.size(), t.request.max_body_bytes)) {
        t.too_large = true;
        t.response.body.resize(std::min(t.response.body.size(), detail::k_kept_of_too_large));
        t.response.body.shrink_to_fit();
        return false;
    }
    t.response.body.append(piece);
    if (t.request.on_data) {
        t.request.on_data(piece);
    }
    return true;
}

// Returning less than was given makes curl end the transfer.
size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string_view chunk(data, size * n);
    if (!t->inflater) {
        return take(*t, chunk) ? chunk.size() : 0;
    }
    // A stream that decodes to little or nothing is bounded on the wire.
    t->wire_bytes += chunk.size();
    if (t->wire_bytes > detail::wire_limit(t->request.max_body_bytes)) {
        t->too_large = true;
        t->response.body.resize(std::min(t->response.body.size(), detail::k_kept_of_too_large));
        t->response.body.shrink_to_fit();
        return 0;
    }
    const bool ok =
        t->inflater->feed(chunk, [&](std::string_view piece) { return take(*t, piece); });
    if (!ok && !t->too_large) {
        t->decode_error = t->inflater->feed_error();
    }
    return ok ? chunk.size() : 0;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string_view line(data, size * n);
    if (line.size() >= 5 && strncasecmp(line.data(), "HTTP/", 5) == 0) {
        // A head begins (after an interim answer or a proxy's to CONNECT):
        // the encoding, and what a retry or the record reads, are the new
        // head's (a 103's Retry-After held each retry for the whole
        // --timeout: an audit).
        t->inflater.reset();
        t->wire_bytes = 0;
        t->response.retry_after.reset();
        t->response.location.reset();
        t->response.server_header.clear();
        return size * n;
    }
    auto colon = line.find(':');
    if (colon != std::string_view::npos) {
        std::string name(line.substr(0, colon));
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        auto value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
            value.remove_prefix(1);
        }
        while (!value.empty() &&
               (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
            value.remove_suffix(1);
        }
        if (name == "content-encoding") {
            auto encoding = detail::encoding_of(value);
            if (!encoding) {
                t->decode_error = detail::unasked_encoding_error(value);
                return 0; // ends the transfer
            }
            t->inflater = *encoding == detail::Encoding::identity
                              ? nullptr
                              : std::make_unique<detail::Inflater>(*encoding);
        } else if (name == "retry-after") {
            t->response.retry_after = std::string(value);
        } else if (name == "location") {
            t->response.location = std::string(value);
        } else if (name == "server") {
            t->response.server_header = std::string(value);
        }
    }
    return size * n;
}

void configure(CURL* easy, Transfer& t) {
    lib().easy_setopt(easy, CURLOPT_URL, t.request.url.c_str());
    lib().easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    lib().easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    lib().easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(t.request.timeout.count()));
    lib().easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                      static_cast<long>(std::min<int64_t>(t.request.timeout.count(), 30'000)));
    lib().easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    lib().easy_setopt(easy, CURLOPT_WRITEDATA, &t);
    lib().easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    lib().easy_setopt(easy, CURLOPT_HEADERDATA, &t);
    lib().easy_setopt(easy, CURLOPT_ERRORBUFFER, t.error);
    lib().easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    // A redirect is the server's answer, stored as such: following one sent
    // requests to other hosts and protocols, and loops without end.
    lib().easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    lib().easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    // Asked for as the Beast client asks, and decoded by diffeval: libcurl's
    // own decoder takes a compressed body cut short for a whole one.
    lib().easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "gzip, deflate");
    lib().easy_setopt(easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
    lib().easy_setopt(easy, CURLOPT_PRIVATE, &t);
    for (const auto& h : t.request.headers) {
        t.headers = lib().slist_append(t.headers, h.c_str());
    }
    if (t.request.method == "POST") {
        t.headers = lib().slist_append(t.headers, "Expect:");
        lib().easy_setopt(easy, CURLOPT_POST, 1L);
        static const std::string k_empty;
        const std::string& body = t.request.body ? *t.request.body : k_empty;
        lib().easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
        lib().easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else {
        lib().easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    }
    lib().easy_setopt(easy, CURLOPT_HTTPHEADER, t.headers);
}

void finish(CURL* easy, CURLcode rc, Transfer& t) {
    t.response.ended_at = std::chrono::steady_clock::now();
    lib().easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &t.response.status);
    t.response.tag = t.request.tag;
    if (rc == CURLE_OK && t.inflater && t.inflater->cut_short()) {
        t.response.transport = Transport::failed;
        t.response.transport_error = std::string(detail::k_cut_short);
        return;
    }
    if (rc == CURLE_OK) {
        t.response.transport = Transport::ok;
        return;
    }
    if (t.too_large) {
        t.response.transport = Transport::too_large;
        t.response.transport_error =
            fmt::format("the response body passed the limit of {} bytes (--max-response-bytes)",
                        t.request.max_body_bytes);
        return;
    }
    t.response.transport =
        rc == CURLE_OPERATION_TIMEDOUT ? Transport::timed_out : Transport::failed;
    t.response.connected = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST &&
                           rc != CURLE_COULDNT_RESOLVE_PROXY;
    t.response.transport_error = !t.decode_error.empty() ? t.decode_error
                                 : t.error[0]            ? t.error
                                                         : lib().easy_strerror(rc);
}

using Clock = std::chrono::steady_clock;

// The most ready sockets taken from epoll per poll; the rest stay ready for
// the next one.
constexpr int k_events_per_wait = 256;

// Marks a socket already in the epoll set (libcurl keeps it per socket).
char k_in_epoll_set = 0;

// libcurl's multi interface: the transfers MultiClient does not hand to
// PlainMulti.
struct CurlMulti {
    CurlMulti();
    ~CurlMulti();
    CurlMulti(const CurlMulti&) = delete;
    CurlMulti& operator=(const CurlMulti&) = delete;
    void submit(Request request);
    void poll(std::chrono::milliseconds max_wait, std::vector<Response>& done);
    void cancel_all();
    void set_max_connections(size_t n);
    size_t in_flight() const { return active.size() + refused.size(); }

    CURLM* multi = nullptr; // null when setup_error says why
    int epoll_fd = -1;
    // Why nothing can be sent (libcurl could not be loaded, no epoll set):
    // each transfer submitted fails with it at the next poll.
    std::string setup_error;
    std::vector<Response> refused;
    // The deadline the timer callback last gave; empty when it has none.
    std::optional<Clock::time_point> timer;
    std::vector<CURL*> idle; // recycled easy handles
    std::unordered_map<CURL*, std::unique_ptr<Transfer>> active;

    // How long until libcurl's timers are due (zero when they are), or
    // nothing when it has none: the sooner of curl_multi_timeout() and the
    // timer callback's deadline.
    std::optional<Clock::duration> until_due() const;
    // Let libcurl handle what is due by time: transfers to start, timeouts.
    void run_timers();
    // Wait at most `max_wait` (less when a timer is due sooner) for sockets,
    // hand the ready ones to libcurl, then run its timers if they are due.
    void wait_and_act(std::chrono::milliseconds max_wait);
    // Move every finished transfer's Response into `done`.
    void collect(std::vector<Response>& done);

    static int on_socket(CURL*, curl_socket_t fd, int what, void* user, void* in_set);
    static int on_timer(CURLM*, long timeout_ms, void* user);
};

// CURLMOPT_SOCKETFUNCTION: mirror libcurl's interest in `fd` in the epoll
// set; `in_set` is what curl_multi_assign stored for it (null when new).
int CurlMulti::on_socket(CURL*, curl_socket_t fd, int what, void* user, void* in_set) {
    auto* impl = static_cast<CurlMulti*>(user);
    epoll_event ev{};
    ev.data.fd = fd;
    if (what == CURL_POLL_REMOVE) {
        // Fails harmlessly when the socket is already closed.
        epoll_ctl(impl->epoll_fd, EPOLL_CTL_DEL, fd, &ev);
        return 0;
    }
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    const int op = in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(impl->epoll_fd, op, fd, &ev) != 0 && (errno == EEXIST || errno == ENOENT)) {
        // The set disagrees with what libcurl last said about this socket
        // number (closed and reused, or added before); take its word. Any
        // other failure is not reported: -1 would end every transfer of the
        // multi handle, while an unwatched one still ends at its timeout.
        epoll_ctl(impl->epoll_fd, errno == EEXIST ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
    }
    if (!in_set) {
        lib().multi_assign(impl->multi, fd, &k_in_epoll_set);
    }
    return 0;
}

// CURLMOPT_TIMERFUNCTION: when libcurl next wants CURL_SOCKET_TIMEOUT; -1
// takes the deadline away, 0 makes it due at once (libcurl may not be
// called back from inside its own callback).
int CurlMulti::on_timer(CURLM*, long timeout_ms, void* user) {
    auto* impl = static_cast<CurlMulti*>(user);
    if (timeout_ms < 0) {
        impl->timer.reset();
    } else {
        impl->timer = Clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return 0;
}

std::optional<Clock::duration> CurlMulti::until_due() const {
    std::optional<Clock::duration> until;
    long timeout_ms = -1;
    lib().multi_timeout(multi, &timeout_ms);
    if (timeout_ms >= 0) {
        until = std::chrono::milliseconds(timeout_ms);
    }
    if (timer) {
        const auto left = std::max(*timer - Clock::now(), Clock::duration::zero());
        until = until ? std::min(*until, left) : left;
    }
    return until;
}

void CurlMulti::run_timers() {
    // Cleared first: libcurl announces the deadline that follows, even an
    // unchanged one, after a CURL_SOCKET_TIMEOUT.
    timer.reset();
    int running = 0;
    lib().multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

void CurlMulti::wait_and_act(std::chrono::milliseconds max_wait) {
    auto wait = max_wait;
    if (auto until = until_due()) {
        // Rounded up: waking before the deadline would only wait again.
        wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(*until));
    }
    epoll_event events[k_events_per_wait];
    const int n = epoll_wait(epoll_fd, events, k_events_per_wait, static_cast<int>(wait.count()));
    int running = 0;
    for (int i = 0; i < n; ++i) {
        const uint32_t e = events[i].events;
        const int flags = ((e & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                          ((e & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                          ((e & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        lib().multi_socket_action(multi, events[i].data.fd, flags, &running);
    }
    auto until = until_due();
    if (n <= 0 || (until && *until == Clock::duration::zero())) {
        run_timers();
    }
}

void CurlMulti::collect(std::vector<Response>& done) {
    int left = 0;
    while (CURLMsg* msg = lib().multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        CURL* easy = msg->easy_handle;
        auto it = active.find(easy);
        finish(easy, msg->data.result, *it->second);
        lib().multi_remove_handle(multi, easy);
        lib().slist_free_all(it->second->headers);
        done.push_back(std::move(it->second->response));
        active.erase(it);
        idle.push_back(easy);
    }
}

CurlMulti::CurlMulti() {
    if (auto api = detail::curl_api(); !api) {
        setup_error = api.error().message;
        return;
    }
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) {
        setup_error = fmt::format("cannot watch sockets: {}", std::strerror(errno));
        return;
    }
    multi = lib().multi_init();
    lib().multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1024L);
    lib().multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &CurlMulti::on_socket);
    lib().multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    lib().multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &CurlMulti::on_timer);
    lib().multi_setopt(multi, CURLMOPT_TIMERDATA, this);
}

CurlMulti::~CurlMulti() {
    cancel_all();
    if (!multi) {
        return;
    }
    for (auto* e : idle) {
        lib().easy_cleanup(e);
    }
    // The pool's sockets are taken out of the epoll set during cleanup.
    lib().multi_cleanup(multi);
    if (epoll_fd >= 0) {
        close(epoll_fd);
    }
}

void CurlMulti::submit(Request request) {
    if (!multi) {
        Response r;
        r.tag = request.tag;
        r.transport = Transport::failed;
        r.transport_error = setup_error;
        r.ended_at = Clock::now();
        refused.push_back(std::move(r));
        return;
    }
    CURL* easy = nullptr;
    if (!idle.empty()) {
        easy = idle.back();
        idle.pop_back();
        lib().easy_reset(easy);
    } else {
        easy = lib().easy_init();
    }
    auto t = std::make_unique<Transfer>();
    t->request = std::move(request);
    configure(easy, *t);
    active.emplace(easy, std::move(t));
    // Starts at the next poll: adding makes libcurl's timer due at once.
    lib().multi_add_handle(multi, easy);
}

void CurlMulti::poll(std::chrono::milliseconds max_wait, std::vector<Response>& done) {
    if (!multi) {
        std::move(refused.begin(), refused.end(), std::back_inserter(done));
        refused.clear();
        return;
    }
    if (auto until = until_due(); until && *until == Clock::duration::zero()) {
        run_timers();
    }
    const size_t before = done.size();
    collect(done);
    if (done.size() == before && !active.empty()) {
        wait_and_act(max_wait);
        collect(done);
    }
}

void CurlMulti::cancel_all() {
    refused.clear();
    for (auto& [easy, t] : active) {
        lib().multi_remove_handle(multi, easy);
        lib().slist_free_all(t->headers);
        lib().easy_cleanup(easy);
    }
    active.clear();
}

void CurlMulti::set_max_connections(size_t n) {
    if (!multi) {
        return;
    }
    lib().multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(std::max<size_t>(n, 1)));
}

} // namespace

// Plain http:// goes to PlainMulti; libcurl's multi handle is made when a
// transfer first needs it (https, a proxy).
struct MultiClient::Impl {
    detail::PlainMulti plain;
    std::unique_ptr<CurlMulti> curl;
    size_t max_connections = 1024;
    std::unordered_map<std::string, bool> plain_url; // each URL's route, decided once
};

MultiClient::MultiClient() : m_impl(std::make_unique<Impl>()) {}

MultiClient::~MultiClient() = default;

void MultiClient::submit(Request request) {
    auto [it, added] = m_impl->plain_url.try_emplace(request.url, false);
    if (added) {
        it->second = detail::plain_client_can_send(request.url);
    }
    if (it->second) {
        m_impl->plain.submit(std::move(request));
        return;
    }
    if (!m_impl->curl) {
        m_impl->curl = std::make_unique<CurlMulti>();
        m_impl->curl->set_max_connections(m_impl->max_connections);
    }
    m_impl->curl->submit(std::move(request));
}

std::vector<Response> MultiClient::poll(std::chrono::milliseconds max_wait) {
    std::vector<Response> done;
    auto& plain = m_impl->plain;
    auto* curl = m_impl->curl.get();
    if (!curl || curl->in_flight() == 0) {
        plain.poll(max_wait, done);
    } else if (plain.in_flight() == 0) {
        curl->poll(max_wait, done);
    } else {
        // Both have transfers: neither may block the other for long.
        const auto turn = std::min(max_wait, std::chrono::milliseconds(1));
        plain.poll(std::chrono::milliseconds(0), done);
        curl->poll(done.empty() ? turn : std::chrono::milliseconds(0), done);
    }
    return done;
}

void MultiClient::cancel_all() {
    m_impl->plain.cancel_all();
    if (m_impl->curl) {
        m_impl->curl->cancel_all();
    }
}

void MultiClient::set_max_connections(size_t n) {
    m_impl->max_connections = n;
    m_impl->plain.set_max_connections(n);
    if (m_impl->curl) {
        m_impl->curl->set_max_connections(n);
    }
}

size_t MultiClient::in_flight() const {
    return m_impl->plain.in_flight() + (m_impl->curl ? m_impl->curl->in_flight() : 0);
}

size_t MultiClient::unasked_bytes(const std::string& url) {
    return m_impl->plain.unasked_bytes(url);
}

namespace {

// fetch() over plain http://, on the run's own client: no libcurl to load
// for a preflight or a launched server's health check.
Response fetch_plain(const Request& request) {
    detail::PlainMulti plain;
    plain.submit(request);
    std::vector<Response> done;
    while (done.empty()) {
        if (request.cancel && request.cancel->load()) {
            plain.cancel_all();
            Response r;
            r.tag = request.tag;
            r.transport = Transport::cancelled;
            r.transport_error = "interrupted";
            return r;
        }
        plain.poll(std::chrono::milliseconds(20), done);
    }
    return std::move(done.front());
}

} // namespace

Response fetch(const Request& request) {
    if (detail::plain_client_can_send(request.url)) {
        return fetch_plain(request);
    }
    if (auto api = detail::curl_api(); !api) {
        Response r;
        r.tag = request.tag;
        r.transport = Transport::failed;
        r.transport_error = api.error().message;
        r.ended_at = std::chrono::steady_clock::now();
        return r;
    }
    // A private multi handle rather than curl_easy_perform, so the wait can
    // be cut short by Request::cancel between short polls.
    CURLM* multi = lib().multi_init();
    CURL* easy = lib().easy_init();
    Transfer t;
    t.request = request;
    configure(easy, t);
    lib().multi_add_handle(multi, easy);
    std::optional<CURLcode> rc;
    while (!rc) {
        if (request.cancel && request.cancel->load()) {
            break;
        }
        int running = 0;
        lib().multi_perform(multi, &running);
        int left = 0;
        while (CURLMsg* msg = lib().multi_info_read(multi, &left)) {
            if (msg->msg == CURLMSG_DONE) {
                rc = msg->data.result;
            }
        }
        if (!rc) {
            lib().multi_poll(multi, nullptr, 0, 20, nullptr);
        }
    }
    if (rc) {
        finish(easy, *rc, t);
    } else {
        t.response.tag = request.tag;
        t.response.transport = Transport::cancelled;
        t.response.transport_error = "interrupted";
    }
    lib().multi_remove_handle(multi, easy);
    lib().slist_free_all(t.headers);
    lib().easy_cleanup(easy);
    lib().multi_cleanup(multi);
    return std::move(t.response);
}

namespace {

// What follows a URL's "scheme://" up to its path, query or fragment: the
// user information, host and port. Empty without a scheme.
std::string_view authority_of(std::string_view url) {
    const auto scheme = url.find("://");
    if (scheme == std::string_view::npos) {
        return {};
    }
    const auto rest = url.substr(scheme + 3);
    return rest.substr(0, rest.find_first_of("/?#"));
}

} // namespace

std::string_view url_secret(std::string_view url) {
    const auto authority = authority_of(url);
    const auto at = authority.rfind('@');
    if (at == std::string_view::npos) {
        return {};
    }
    const auto userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    return colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
}

namespace {

// `s` with each %XX replaced by its byte, as libcurl decodes a URL's user
// information; a '%' not followed by two hex digits stays as it is.
std::string percent_decoded(std::string_view s) {
    const auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    };
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

} // namespace

std::vector<std::string> url_secret_spellings(std::string_view url) {
    const auto secret = url_secret(url);
    if (secret.empty()) {
        return {};
    }
    std::vector<std::string> out{std::string(secret)};
    if (auto decoded = percent_decoded(secret); decoded != secret) {
        out.push_back(std::move(decoded));
    }
    // The user information before the '@': "user:password", or a token
    // alone, which libcurl sends as the user with an empty password.
    const auto authority = authority_of(url);
    const auto userinfo = authority.substr(0, authority.rfind('@'));
    const auto colon = userinfo.find(':');
    const std::string credential = colon == std::string_view::npos
                                       ? percent_decoded(userinfo) + ":"
                                       : percent_decoded(userinfo.substr(0, colon)) + ":" +
                                             percent_decoded(userinfo.substr(colon + 1));
    out.push_back(util::base64(credential));
    return out;
}

std::string url_without_secret(std::string_view url) {
    const auto secret = url_secret(url);
    if (secret.empty()) {
        return std::string(url);
    }
    const auto at = static_cast<size_t>(secret.data() - url.data());
    return fmt::format("{}{}{}", url.substr(0, at), util::Redactor::k_mark,
                       url.substr(at + secret.size()));
}

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// A decimal number without a leading zero (but "0") and at most `max`.
bool plain_number(std::string_view s, unsigned max) {
    if (s.empty() || s.size() > 5 || (s.size() > 1 && s.front() == '0') ||
        !std::all_of(s.begin(), s.end(), is_digit)) {
        return false;
    }
    unsigned v = 0;
    for (char c : s) {
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    return v <= max;
}

// Four decimal numbers 0-255 joined by dots.
bool dotted_quad(std::string_view host) {
    for (int part = 0; part < 4; ++part) {
        const auto dot = host.find('.');
        if ((part < 3) == (dot == std::string_view::npos) ||
            !plain_number(host.substr(0, dot), 255)) {
            return false;
        }
        host = part < 3 ? host.substr(dot + 1) : std::string_view();
    }
    return true;
}

// A host name that starts with a letter (so no IPv4 number form), of labels
// of letters, digits and inner hyphens joined by dots.
bool plain_name(std::string_view host) {
    if (host.empty() || host.size() > 253 || !is_letter(host.front())) {
        return false;
    }
    size_t start = 0;
    while (start <= host.size()) {
        const auto dot = std::min(host.find('.', start), host.size());
        const auto label = host.substr(start, dot - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
            !std::all_of(label.begin(), label.end(),
                         [](char c) { return is_letter(c) || is_digit(c) || c == '-'; })) {
            return false;
        }
        start = dot + 1;
    }
    return true;
}

} // namespace

bool detail::plainly_valid_url(std::string_view url) {
    std::string_view rest;
    if (url.substr(0, 7) == "http://") {
        rest = url.substr(7);
    } else if (url.substr(0, 8) == "https://") {
        rest = url.substr(8);
    } else {
        return false;
    }
    if (rest.size() > 2000) {
        return false;
    }
    const auto slash = std::min(rest.find('/'), rest.size());
    std::string_view host = rest.substr(0, slash);
    const std::string_view path = rest.substr(slash);
    if (const auto colon = host.find(':'); colon != std::string_view::npos) {
        const auto port = host.substr(colon + 1);
        if (!plain_number(port, 65535) || port == "0") {
            return false;
        }
        host = host.substr(0, colon);
    }
    if (!dotted_quad(host) && !plain_name(host)) {
        return false;
    }
    return std::all_of(path.begin(), path.end(), [](char c) {
        return is_letter(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
               c == '/';
    });
}

std::optional<std::string> detail::curl_url_problem(const std::string& url) {
    auto api = detail::curl_api();
    if (!api) {
        return fmt::format("could not be checked: {}", api.error().message);
    }
    const auto& curl = **api;
    std::unique_ptr<CURLU, decltype(curl.url_cleanup)> parsed(curl.url(), curl.url_cleanup);
    if (!parsed) {
        return "could not be parsed: out of memory";
    }
    if (const CURLUcode c = curl.url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0);
        c != CURLUE_OK) {
        return fmt::format("is not a valid URL: {}", curl.url_strerror(c));
    }
    char* port = nullptr;
    if (curl.url_get(parsed.get(), CURLUPART_PORT, &port, 0) == CURLUE_OK && port) {
        const bool zero =
            std::all_of(port, port + std::strlen(port), [](char c) { return c == '0'; });
        curl.free(port);
        if (zero) {
            return "is not a valid URL: port 0 cannot be connected to";
        }
    }
    return std::nullopt;
}

std::optional<std::string> http_url_problem(const std::string& url) {
    const auto scheme_end = url.find("://");
    const std::string_view scheme = scheme_end == std::string::npos
                                        ? std::string_view()
                                        : std::string_view(url).substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") {
        return "is not an http:// or https:// URL";
    }
    // libcurl's own parser, which sends every https:// request: its words
    // say what is wrong (a port past 65535, an unclosed IPv6 bracket). A
    // URL of the plain form (a name or dotted quad, a port, a path of
    // unreserved characters) is one it takes, so libcurl is not loaded for it.
    if (!detail::plainly_valid_url(url)) {
        if (auto problem = detail::curl_url_problem(url)) {
            return problem;
        }
    }
    // What the plain http:// client reads of it must be there too: a host,
    // and a port that is a number (libcurl takes ":" alone as the default).
    // A URL with user information goes to libcurl, which parsed it above.
    if (authority_of(url).find('@') == std::string_view::npos && !host_port(url)) {
        return "is not a valid URL: give http://HOST:PORT, e.g. http://localhost:8000";
    }
    return std::nullopt;
}

std::optional<HostPort> host_port(std::string_view url) {
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) {
        return std::nullopt;
    }
    const bool https = scheme_end == 5 && strncasecmp(url.data(), "https", 5) == 0;
    if (!https && !(scheme_end == 4 && strncasecmp(url.data(), "http", 4) == 0)) {
        return std::nullopt;
    }
    std::string_view host = authority_of(url);
    if (host.empty() || host.find('@') != std::string_view::npos) {
        return std::nullopt;
    }
    std::string_view port = https ? "443" : "80";
    if (host.front() == '[') {
        const auto close = host.find(']');
        if (close == std::string_view::npos) {
            return std::nullopt;
        }
        if (close + 1 < host.size()) {
            if (host[close + 1] != ':') {
                return std::nullopt;
            }
            port = host.substr(close + 2);
        }
        host = host.substr(1, close - 1);
    } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
        port = host.substr(colon + 1);
        host = host.substr(0, colon);
    }
    if (host.empty() || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    return HostPort{std::string(host), std::string(port)};
}

} // namespace diffeval::http
