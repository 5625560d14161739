// The event loop: one phase's queued work sent through http::MultiClient within
// each server's in-flight limit, each finished attempt handed to the retry
// policy (retry.hpp), final outcomes parsed, redacted and handed to the
// store's writer. It moves bytes and counts; it decides nothing itself.
#include <harness/engine/run_parts.hpp>

#include <harness/engine/redact_body.hpp>
#include <harness/engine/retry.hpp>
#include <harness/http/sse.hpp>
#include <harness/util/hash.hpp>
#include <harness/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <unistd.h>
#include <unordered_map>

namespace diffeval::engine {

// Rows read from the plan at a time (at least): each read stores its rows in
// one transaction, which rewrites the index pages it touches, so fewer,
// larger reads cost less.
constexpr size_t k_refill_rows = 2048;
// Requests a server is sent in one turn of the loop, at most: at 1,024
// connections the opening burst otherwise sends every request before the
// first answer is read, and those answers wait for all the sends.
constexpr size_t k_sends_per_turn = 32;

namespace {

// What a finished transfer that is not a usable HTTP 200 is stored as, in
// `row` (error and error_kind); false when it is a 200 to parse.
bool classify_failure(const http::Response& resp, store::ResponseRow& row) {
    if (resp.transport == http::Transport::too_large) {
        row.error_kind = "size";
        row.error = resp.transport_error;
    } else if (resp.transport != http::Transport::ok) {
        row.error_kind = resp.transport == http::Transport::timed_out ? "timeout" : "transport";
        row.error = resp.transport_error;
    } else if (resp.status >= 300 && resp.status < 400) {
        row.error_kind = "http";
        // The header is the server's words: one line, as its body's are.
        row.error =
            fmt::format("HTTP {}: redirect to {} not followed", resp.status,
                        resp.location ? util::one_line(*resp.location, util::k_server_words_bytes)
                                      : std::string("(no Location header)"));
    } else if (resp.status != 200) {
        // 2xx other than 200 (206 Partial Content, 204 No Content) is no
        // complete answer either.
        row.error_kind = "http";
        row.error = fmt::format("HTTP {}: {}", resp.status, error_message(resp.body));
    } else {
        return false;
    }
    return true;
}

// What a body is, for redaction: its shape, whether the transfer cut it
// short, and how many events a stream sent after its answer ended.
struct BodyKind {
    BodyShape shape = BodyShape::json;
    util::TextEnd end = util::TextEnd::whole;
    size_t unread_events = 0;
};

// Cut the run's secrets out of every text field of `row` (answered by
// `endpoint`, its body of `kind`), flagging it. A decoded field that held one
// means the body holds it too, perhaps split across stream events or in
// escapes of the server's own; a body cut short may end in its first part,
// and events after a stream's end are read by no field: in each case the
// body is rewritten from its decoded strings, and a stream's text and
// reasoning are read again from it (a key that crossed the answer's end
// leaves its mark inside the answer).
void redact_row(const util::Redactor& redactor, Endpoint endpoint, const BodyKind& kind,
                store::ResponseRow& row) {
    if (redactor.empty()) {
        return;
    }
    bool decoded = redactor.apply(row.error);
    for (auto* field : {&row.text, &row.reasoning, &row.finish_reason}) {
        if (*field) {
            decoded |= redactor.apply(**field);
        }
    }
    if (auto* sr = std::get_if<std::string>(&row.stop_reason)) {
        decoded |= redactor.apply(*sr);
    }
    bool hit = decoded;
    // A key escaped in a spelling of the server's own (`sk-AU\u0044IT`) in a
    // string no field is read from (a body of the wrong shape, an `id`) is
    // found only decoded (an audit found one stored whole).
    if (decoded || kind.end == util::TextEnd::cut || kind.unread_events > 0 ||
        escaped_secret(row.response_json, redactor)) {
        auto body = redact_body(row.response_json, kind.shape, endpoint, redactor, kind.end);
        if (body != row.response_json) {
            hit = true;
            row.response_json = std::move(body);
            if (row.streamed) {
                http::SseParser parser;
                StreamAccumulator acc(endpoint);
                for (const auto& e : parser.feed(row.response_json)) {
                    acc.on_event(e, 0);
                }
                if (row.text) {
                    row.text = redactor.redacted(acc.text());
                }
                if (row.reasoning) {
                    row.reasoning = redactor.redacted(acc.reasoning());
                }
            }
        }
    }
    hit |= redactor.apply(row.response_json);
    hit |= redactor.apply(row.notes);
    row.redacted = row.redacted || hit;
}

class Progress {
public:
    Progress(ProgressStyle style, std::ostream& log, int64_t total)
        : m_style(style), m_log(log), m_total(total), m_start(Clock::now()), m_last(m_start) {}

    // The plan is read as it is sent: what it finds stored lowers the total.
    void set_total(int64_t total) { m_total = total; }

    void update(int64_t done, int64_t errors, bool final = false) {
        if (m_style == ProgressStyle::none) {
            return;
        }
        auto now = Clock::now();
        auto since = now - m_last;
        if (!final && !due(since, done)) {
            return;
        }
        m_last = now;
        m_last_done = done;
        double secs = std::chrono::duration<double>(now - m_start).count();
        double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
        std::string eta = rate > 0 && done < m_total
                              ? fmt::format("{:.0f}s", static_cast<double>(m_total - done) / rate)
                              : "-";
        if (m_style == ProgressStyle::bar) {
            constexpr int k_width = 30;
            int filled = m_total > 0 ? static_cast<int>(k_width * done / m_total) : k_width;
            m_log << fmt::format("\r[{}{}] {}/{} {:.0f} req/s, {}, ETA {}  ",
                                 std::string(filled, '#'), std::string(k_width - filled, '.'), done,
                                 m_total, rate, util::counted(errors, "error"), eta);
            if (final) {
                m_log << "\n";
            }
        } else {
            m_log << fmt::format("progress: {}/{} done, {:.0f} req/s, {}, ETA {}\n", done, m_total,
                                 rate, util::counted(errors, "error"), eta);
        }
        m_log.flush();
    }

private:
    // A bar redraws 10 times a second. Lines (a pipe, a CI log) come at most
    // once a second, and then only when another 5% is done or 30 s have
    // passed: a short run prints a few lines, an hour-long one about 120.
    bool due(Clock::duration since, int64_t done) const {
        if (m_style == ProgressStyle::bar) {
            return since > std::chrono::milliseconds(100);
        }
        if (since < std::chrono::seconds(1)) {
            return false;
        }
        return since >= std::chrono::seconds(30) || (done - m_last_done) * 20 >= m_total;
    }

    ProgressStyle m_style;
    std::ostream& m_log;
    int64_t m_total;
    Clock::time_point m_start;
    Clock::time_point m_last;
    int64_t m_last_done = 0;
};

} // namespace

// One phase's loop: the retry timers and the transfers in flight, over the
// Sender's client, and the phase's servers, writer and counts.
struct Sender::Loop {
    Sender& s;
    const std::vector<size_t>& phase;
    std::vector<ServerState>& servers;
    Launched& launched;
    store::Store& db;
    store::Writer& writer;
    RunSummary& summary;
    std::priority_queue<Retry, std::vector<Retry>, std::greater<>> retries;
    std::unordered_map<uint64_t, Work> in_flight;
    std::optional<util::Error> plan_error; // planning failed: the phase stops
    size_t backlog_limit = 256;            // answers waiting for the writer, at most

    // What a turn's fill did.
    enum class Filled {
        waiting_on_writer, // nothing sent: the writer's backlog is full
        sent,              // every server sent what it has room for
        held_back,         // a server stopped at k_sends_per_turn with room and work left
    };

    bool work_left() const {
        return !in_flight.empty() || !retries.empty() ||
               std::any_of(servers.begin(), servers.end(), [](const auto& st) {
                   return !st.queue.empty() || (st.planner && !st.planner->finished());
               });
    }

    // Start an attempt of `w` on its server.
    void submit(Work w) {
        const auto& config = s.m_ctx.config;
        auto& st = servers[w.server];
        if (w.attempts == 0) {
            w.started_at = store::now_iso8601();
        } else {
            ++summary.retries; // counted when made, not when scheduled
        }
        ++w.attempts;
        w.attempt_start = Clock::now();
        http::Request req;
        req.tag = s.m_next_tag++;
        req.method = "POST";
        req.url = st.planner->url(w);
        req.headers = st.headers;
        if (!w.body) {
            w.body = st.planner->body(w);
        }
        req.body = w.body;
        req.timeout = config.timeout;
        req.max_body_bytes = static_cast<size_t>(config.max_response_bytes);
        if (config.stream && !w.probe) {
            w.stream = std::make_shared<StreamState>(w.endpoint, w.attempt_start);
            req.on_data = [state = w.stream](std::string_view chunk) {
                for (const auto& event : state->parser.feed(chunk)) {
                    auto at =
                        std::chrono::duration<double, std::milli>(Clock::now() - state->start);
                    state->acc.on_event(event, at.count());
                }
            };
        }
        ++st.in_flight;
        ++st.sent;
        in_flight.emplace(req.tag, std::move(w));
        s.m_client.submit(std::move(req));
    }

    // Due retries go back to the front of their server's queue; then every
    // server sends up to its limit, at most k_sends_per_turn of them.
    // Answers not yet committed are what a failing disk loses: while
    // `backlog_limit` of them wait for the writer nothing new is sent.
    Filled fill() {
        while (!retries.empty() && retries.top().when <= Clock::now()) {
            Work w = retries.top().work;
            retries.pop();
            if (!launched.dead[w.server]) {
                servers[w.server].queue.push_front(std::move(w));
            } else {
                drop(w);
            }
        }
        if (writer.backlog() >= backlog_limit) {
            writer.nudge();
            return Filled::waiting_on_writer;
        }
        Filled filled = Filled::sent;
        for (auto& st : servers) {
            refill(st);
            size_t sent = 0;
            while (st.in_flight < st.limit && !st.queue.empty()) {
                if (sent == k_sends_per_turn) {
                    filled = Filled::held_back;
                    break;
                }
                Work w = std::move(st.queue.front());
                st.queue.pop_front();
                submit(std::move(w));
                ++sent;
            }
        }
        return filled;
    }

    // Read more of `st`'s plan when its queue falls below its in-flight limit
    // (at least k_refill_rows): up to twice that many are queued. The first
    // read fills the in-flight limit only, so sending starts sooner.
    void refill(ServerState& st) {
        const size_t low = std::max<size_t>(st.limit, k_refill_rows);
        if (!st.planner || st.planner->finished() || plan_error || st.queue.size() >= low) {
            return;
        }
        const size_t want = st.planner->started() ? 2 * low : std::max<size_t>(st.limit, 1);
        if (auto r = st.planner->fill(st, db, summary, want); !r) {
            plan_error = s.m_ctx.redacted(r.error());
        }
    }

    // A launched server died: stop sending to it. What it had not answered
    // stays unsent, so the next run sends it.
    void check_crashes() {
        const auto& config = s.m_ctx.config;
        for (size_t si : phase) {
            auto& ls = launched.servers[si];
            if (!ls || launched.dead[si] || !ls->exited()) {
                continue;
            }
            launched.dead[si] = true;
            for (const auto& w : servers[si].queue) {
                drop(w);
            }
            servers[si].queue.clear();
            if (servers[si].planner) {
                servers[si].planner->abandon();
            }
            summary.crashed.push_back(config.servers[si].name);
            s.m_ctx.log << fmt::format(
                "server '{}' {} during the run; its unanswered requests are kept for the "
                "next run. Last log lines:\n{}\n",
                config.servers[si].name, ls->exit_description(),
                s.m_ctx.inputs.redactor.redacted(ls->log_tail(10)));
        }
    }

    // How many earlier attempts' failures a retried row's notes give.
    static constexpr int k_failures_kept = 3;

    // Asks the retry policy about `w`'s attempt that returned `resp` (and,
    // once parsed, its row `parsed`); schedules the retry it asks for,
    // noting why the attempt failed. The jitter stream advances only when a
    // retry is scheduled.
    bool retried(Work& w, const http::Response& resp, const store::ResponseRow* parsed = nullptr) {
        const std::string_view parsed_error =
            parsed ? std::string_view(parsed->error_kind) : std::string_view();
        const uint64_t next_jitter = util::hash64("jitter", s.m_jitter_state);
        const auto& config = s.m_ctx.config;
        RetryInput in;
        in.attempt = w.attempts;
        in.max_retries = config.retries;
        in.transport = resp.transport;
        in.status = resp.status;
        in.body = &resp.body;
        in.retry_after = &resp.retry_after;
        in.parsed_error_kind = parsed_error;
        in.timeout = config.timeout;
        in.backoff_base = config.retry_backoff;
        in.jitter = 0.5 + util::unit_interval(next_jitter); // 0.5x .. 1.5x
        auto& server = servers[w.server];
        in.fits_alone = server.fits_alone;
        const auto d = retry_policy(in);
        if (!d.retry) {
            return false;
        }
        // Requests that fit alone overflowed a cache they share: fewer at
        // once, or the retries meet the same crowd (four slots of a default
        // llama-server share 4,096 cells; with 1,024 tokens to answer, most
        // attempts failed until they ran out). Those sent together overflow
        // together: one step for all of them.
        if (d.crowded && server.limit > 1 && w.attempt_start > server.limit_lowered) {
            --server.limit;
            server.limit_lowered = Clock::now();
            s.m_ctx.log << fmt::format(
                "server '{}': an answer outgrew the context its requests share (HTTP 500 "
                "\"Context size has been exceeded.\"); retried, with at most {} in flight from "
                "now on\n",
                server.spec->name, server.limit);
        }
        s.m_jitter_state = next_jitter;
        if (w.attempts <= k_failures_kept) {
            // Described only now that it is retried: a response's own
            // failure is classified again by row_of when it is stored.
            store::ResponseRow failure;
            if (!parsed) {
                classify_failure(resp, failure);
            }
            const auto& described = parsed ? *parsed : failure;
            // Redacted whole, then cut: a key cut first would leave its
            // start.
            w.earlier_failures +=
                fmt::format("{}attempt {}: {}", w.earlier_failures.empty() ? "" : "; ", w.attempts,
                            util::one_line(s.m_ctx.inputs.redactor.redacted(fmt::format(
                                               "{}: {}", described.error_kind, described.error)),
                                           160));
        }
        retries.push(Retry{Clock::now() + d.delay, std::move(w)});
        return true;
    }

    // The stored row of `w`'s final attempt, which returned `resp`.
    store::ResponseRow row_of(const Work& w, const http::Response& resp) const {
        store::ResponseRow row;
        row.question_idx = w.question;
        row.request_id = w.request_id;
        row.probe = w.probe != nullptr;
        row.run_id = s.m_run_id;
        row.status = static_cast<int>(resp.status);
        row.response_json = resp.body;
        row.attempts = w.attempts;
        // Up to the answer's last byte: not the time this loop took to get
        // to it among the others read in the same poll.
        row.latency_ms =
            std::chrono::duration<double, std::milli>(resp.ended_at - w.attempt_start).count();
        row.started_at = w.started_at;
        if (classify_failure(resp, row)) {
            // stored as the error it is
        } else if (w.probe) {
            parse_probe_body(resp.body, *w.probe, row);
        } else if (w.stream) {
            w.stream->acc.finish(row);
        } else {
            parse_success_body(resp.body, w.endpoint, row);
        }
        // The server saying it gave up on the answer (vLLM's `abort`,
        // `error`): a failure to deliver, tried again like a 5xx.
        if (row.ok && !w.probe && row.finish_reason &&
            (*row.finish_reason == "abort" || *row.finish_reason == "error")) {
            row.ok = false;
            row.error_kind = "finish";
            row.error = fmt::format("the server ended the answer with finish_reason '{}'",
                                    *row.finish_reason);
        }
        return row;
    }

    // A finished transfer: retried, dropped with its dead server, or stored.
    void finished(const http::Response& resp) {
        auto it = in_flight.find(resp.tag);
        Work w = std::move(it->second);
        in_flight.erase(it);
        --servers[w.server].in_flight;
        w.reached = w.reached || resp.connected;
        const auto& ls = launched.servers[w.server];
        if (resp.transport != http::Transport::ok && ls &&
            (launched.dead[w.server] || ls->exited())) {
            drop(w); // lost with its server: resent by the next run
            // Said now: when this was the last work, the loop ends before
            // its next check, and the run called the crash a clean end.
            check_crashes();
            return;
        }
        // A 200 stream that sent [DONE] is a whole answer even when the
        // server then neither ends the body nor closes (a timeout) or
        // drops the connection: kept, not sent again.
        std::optional<http::Response> whole;
        if (w.stream && w.stream->acc.done() && resp.status == 200 &&
            (resp.transport == http::Transport::timed_out ||
             resp.transport == http::Transport::failed)) {
            whole = resp;
            whole->transport = http::Transport::ok;
        }
        const http::Response& got = whole ? *whole : resp;
        if (retried(w, got)) {
            return;
        }
        auto row = row_of(w, got);
        if (whole) {
            // Which: a transfer that went on (a timeout), or one that failed
            // after [DONE] (a dropped connection, a gzip body cut before its
            // check value), which "did not end" misnamed (audit).
            row.notes += fmt::format(
                "{}the stream sent [DONE] but its transfer {}: {}", row.notes.empty() ? "" : "; ",
                resp.transport == http::Transport::timed_out ? "did not end" : "then failed",
                resp.transport_error);
            // The answer ended at its [DONE]: the wait for an end that never
            // came (the whole --timeout) is not its latency (audit).
            if (const auto done = w.stream->acc.done_ms()) {
                row.latency_ms = *done;
            }
        }
        // A 200 whose body was cut or carried an error event is the server
        // failing to deliver, like a 5xx: the policy may try again.
        if (!row.ok && retried(w, got, &row)) {
            return;
        }
        if (!w.earlier_failures.empty()) {
            const int more = w.attempts - 1 - k_failures_kept;
            row.notes += fmt::format("{}retried after {}{}", row.notes.empty() ? "" : "; ",
                                     w.earlier_failures,
                                     more > 0 ? fmt::format(" (and {} more)", more) : "");
        }
        BodyKind kind;
        if (w.stream) {
            kind.shape = BodyShape::stream;
            kind.unread_events = w.stream->acc.unread_events();
        }
        if (resp.transport != http::Transport::ok) {
            kind.end = util::TextEnd::cut;
        }
        redact_row(s.m_ctx.inputs.redactor, w.endpoint, kind, row);
        if (row.probe) {
            ++summary.probe_readings;
        }
        if (row.ok) {
            ++summary.succeeded;
        } else {
            ++summary.failed;
            summary.unreached += w.reached ? 0 : 1;
            ++summary.failures[util::one_line(
                fmt::format("{}: {}", row.error_kind.empty() ? "error" : row.error_kind, row.error),
                160)];
        }
        writer.push(std::move(row));
        ++s.m_pushed;
    }

    // Stop at once: nothing in flight is kept (counted: those were sent),
    // nor a retry that waits (sent too).
    void abandon() {
        s.m_client.cancel_all();
        summary.dropped_in_flight += static_cast<int64_t>(in_flight.size());
        in_flight.clear();
        for (; !retries.empty(); retries.pop()) {
            drop(retries.top().work);
        }
        for (auto& st : servers) {
            for (const auto& w : st.queue) {
                drop(w);
            }
        }
    }

    // `w` is dropped unanswered: counted when an attempt reached its server
    // (which may have read it; the next run sends it again), not when every
    // attempt was refused at connect, as a dead server's port refuses them.
    void drop(const Work& w) {
        if (w.reached) {
            ++summary.dropped_in_flight;
        }
    }

    // How long to wait for transfers: at most 100 ms, less when a retry is due.
    std::chrono::milliseconds wait_time() const {
        auto wait = std::chrono::milliseconds(100);
        if (!retries.empty()) {
            auto until = std::chrono::duration_cast<std::chrono::milliseconds>(retries.top().when -
                                                                               Clock::now());
            wait = std::clamp(until, std::chrono::milliseconds(0), wait);
        }
        return wait;
    }
};

Sender::Sender(const RunContext& ctx, int64_t run_id)
    : m_ctx(ctx), m_run_id(run_id), m_jitter_state(util::hash64(fmt::format("{}", run_id))) {}

util::Result<bool> Sender::send_phase(const std::vector<size_t>& phase,
                                      std::vector<ServerState>& servers, Launched& launched,
                                      store::Store& db, store::Writer& writer, RunSummary& summary,
                                      int64_t planned) {
    Loop loop{*this, phase, servers, launched, db, writer, summary, {}, {}, {}};
    size_t phase_connections = 0;
    for (size_t si : phase) {
        phase_connections += servers[si].limit;
    }
    m_client.set_max_connections(phase_connections);
    loop.backlog_limit = std::max<size_t>(256, 4 * phase_connections);
    const int64_t done_before = summary.succeeded + summary.failed;
    const int64_t failed_before = summary.failed;
    const int64_t skipped_before = summary.skipped;
    // To send: the plan less what reading it found stored so far.
    Progress progress(m_ctx.options.progress, m_ctx.log, planned);
    const auto update = [&](bool final) {
        progress.set_total(planned - (summary.skipped - skipped_before));
        progress.update(summary.succeeded + summary.failed - done_before,
                        summary.failed - failed_before, final);
    };
    // What the client had seen of each server before this phase: two phases'
    // launched servers may share a host and port.
    std::vector<size_t> unasked_before;
    for (size_t si : phase) {
        unasked_before.push_back(m_client.unasked_bytes(servers[si].spec->url));
    }
    bool store_failed = false;
    while (loop.work_left()) {
        if (m_ctx.stopped()) {
            summary.interrupted = true;
            loop.abandon();
            break;
        }
        // The store failed (disk full, I/O error) or planning did: stop
        // sending at once, so no more answers arrive that cannot be kept.
        if (writer.error() || loop.plan_error) {
            store_failed = writer.error().has_value();
            loop.abandon();
            break;
        }
        loop.check_crashes();
        // Waiting on the writer: look again in a millisecond; with requests
        // held back: read what is ready and come straight back.
        const auto filled = loop.fill();
        const auto wait = filled == Loop::Filled::waiting_on_writer ? std::chrono::milliseconds(1)
                          : filled == Loop::Filled::held_back       ? std::chrono::milliseconds(0)
                                                                    : loop.wait_time();
        if (loop.in_flight.empty() && filled == Loop::Filled::waiting_on_writer) {
            // Nothing to read: go on as soon as the writer takes its queue,
            // not at the end of a 1 ms sleep (about 120 of them in one
            // official demo, 7.6 ms each on average with both cores busy).
            writer.wait_below(loop.backlog_limit, std::chrono::milliseconds(100));
            continue;
        }
        if (loop.in_flight.empty()) {
            if (wait.count() > 0 && !loop.plan_error) {
                usleep(static_cast<useconds_t>(wait.count() * 1000));
            }
            continue;
        }
        for (auto& resp : m_client.poll(wait)) {
            loop.finished(resp);
        }
        update(false);
    }
    writer.flush();
    update(true);
    for (size_t i = 0; i < phase.size(); ++i) {
        const auto& spec = *servers[phase[i]].spec;
        if (const size_t seen = m_client.unasked_bytes(spec.url) - unasked_before[i]; seen > 0) {
            summary.unasked_bytes[spec.name] += static_cast<int64_t>(seen);
        }
    }
    if (loop.plan_error && !store_failed) {
        return *loop.plan_error;
    }
    return !store_failed;
}

} // namespace diffeval::engine
