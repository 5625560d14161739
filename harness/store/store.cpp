// Schema, migrations, statements and the writer thread of the results store.
//
// All SQL lives here, prepared once when the store opens. The schema is a
// public interface documented in docs/schema.md; change it only by adding a
// rung to the migration ladder in migrate().
#include <harness/store/store.hpp>

#include <harness/store/schema.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <unistd.h>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

// Schema version 1: runs, servers, questions, requests, responses, and the
// derived tables classify/score fill (recomputable from the rest).
constexpr std::string_view k_schema_v1 = R"sql(
CREATE TABLE runs (
    run_id           INTEGER PRIMARY KEY,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    status           TEXT NOT NULL DEFAULT 'running',
    dataset          TEXT NOT NULL,
    config_json      TEXT NOT NULL,
    diffeval_version TEXT NOT NULL
);
CREATE TABLE servers (
    name      TEXT PRIMARY KEY,
    url       TEXT NOT NULL,
    model     TEXT,
    info_json TEXT NOT NULL DEFAULT '{}',
    log_path  TEXT,
    log_text  TEXT,
    facts_json TEXT
);
CREATE TABLE questions (
    dataset      TEXT NOT NULL,
    question_idx INTEGER NOT NULL,
    question     TEXT NOT NULL,
    answer       TEXT NOT NULL,
    PRIMARY KEY (dataset, question_idx)
);
CREATE TABLE requests (
    request_id   INTEGER PRIMARY KEY,
    request_key  TEXT NOT NULL UNIQUE,
    server       TEXT NOT NULL,
    framing      TEXT NOT NULL,
    max_tokens   INTEGER NOT NULL,
    repeat       INTEGER NOT NULL,
    question_idx INTEGER NOT NULL,
    dataset      TEXT NOT NULL,
    body_sha256  TEXT NOT NULL,
    request_json TEXT NOT NULL,
    response_id  INTEGER
);
CREATE INDEX requests_group ON requests (server, framing, max_tokens, repeat, question_idx);
CREATE TABLE responses (
    response_id       INTEGER PRIMARY KEY,
    request_id        INTEGER NOT NULL REFERENCES requests (request_id),
    run_id            INTEGER REFERENCES runs (run_id),
    ok                INTEGER NOT NULL,
    status            INTEGER NOT NULL,
    response_json     TEXT NOT NULL,
    text              TEXT,
    reasoning         TEXT,
    finish_reason     TEXT,
    stop_reason,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    attempts          INTEGER NOT NULL,
    latency_ms        REAL NOT NULL,
    ttft_ms           REAL,
    streamed          INTEGER NOT NULL DEFAULT 0,
    token_gaps_ms     TEXT,
    started_at        TEXT NOT NULL,
    error             TEXT,
    error_kind        TEXT
);
CREATE INDEX responses_request ON responses (request_id);
CREATE TABLE classifications (
    response_id       INTEGER PRIMARY KEY REFERENCES responses (response_id),
    opened            INTEGER NOT NULL,
    closed            INTEGER NOT NULL,
    reasoning_started INTEGER NOT NULL,
    outcome           TEXT NOT NULL
);
CREATE TABLE scores (
    response_id    INTEGER NOT NULL REFERENCES responses (response_id),
    scorer         TEXT NOT NULL,
    scorer_version INTEGER NOT NULL,
    score_text     TEXT NOT NULL,
    extracted      TEXT NOT NULL,
    valid          INTEGER NOT NULL,
    correct        INTEGER NOT NULL,
    PRIMARY KEY (response_id, scorer)
);
CREATE VIEW v_responses AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.dataset,
       q.request_json, r.response_json, r.text, r.reasoning, r.finish_reason,
       r.stop_reason, r.prompt_tokens, r.completion_tokens, r.latency_ms, r.ttft_ms,
       r.status, r.error, r.error_kind, r.attempts, r.started_at, r.ok, r.streamed,
       r.token_gaps_ms,
       c.outcome, c.reasoning_started, r.response_id, q.request_id, q.request_key
FROM requests q
JOIN responses r ON r.response_id = q.response_id
LEFT JOIN classifications c ON c.response_id = r.response_id;
CREATE VIEW v_scores AS
SELECT q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, s.scorer,
       s.extracted, s.correct, s.valid, s.response_id
FROM requests q
JOIN scores s ON s.response_id = q.response_id;
)sql";

// Version 2: the requests that have a response, found by it, with their place
// in the matrix. Analysis passes read this small index instead of visiting
// each request's row, which holds the whole request body.
constexpr std::string_view k_schema_v2 = R"sql(
CREATE INDEX requests_counted ON requests
    (response_id, server, framing, max_tokens, repeat, question_idx, dataset);
)sql";

// Version 4: what a response had set aside (`notes`, e.g. a token count that
// was no count) and whether a secret was cut out of it (`redacted`).
constexpr std::string_view k_schema_v4 = R"sql(
ALTER TABLE responses ADD COLUMN notes TEXT;
ALTER TABLE responses ADD COLUMN redacted INTEGER NOT NULL DEFAULT 0;
)sql";

// Statements, indexed by Store::StatementId.
constexpr std::string_view k_statements[] = {
    // k_insert_run
    "INSERT INTO runs (started_at, dataset, config_json, diffeval_version) VALUES (?, ?, ?, ?)",
    // k_end_run
    "UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
    // k_put_server
    "INSERT INTO servers (name, url, model, info_json) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET url = excluded.url, model = excluded.model, "
    "info_json = excluded.info_json",
    // k_put_server_log
    "UPDATE servers SET log_path = ?, log_text = ?, facts_json = ? WHERE name = ?",
    // k_put_question
    "INSERT OR IGNORE INTO questions (dataset, question_idx, question, answer) VALUES (?, ?, ?, ?)",
    // k_put_request
    "INSERT OR IGNORE INTO requests (request_key, server, framing, max_tokens, repeat, "
    "question_idx, dataset, body_sha256, request_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    // k_completed_keys
    "SELECT q.request_key FROM requests q JOIN responses r ON r.response_id = q.response_id "
    "WHERE r.ok = 1",
    // k_insert_response
    "INSERT INTO responses (request_id, run_id, ok, status, response_json, text, reasoning, "
    "finish_reason, stop_reason, prompt_tokens, completion_tokens, attempts, latency_ms, ttft_ms, "
    "streamed, token_gaps_ms, started_at, error, error_kind, notes, redacted) "
    "SELECT request_id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM requests "
    "WHERE request_key = ?",
    // k_point_request: the response that counts is the newest success, else
    // the newest failure; a failure never replaces a success.
    "UPDATE requests SET response_id = last_insert_rowid() WHERE request_key = ? AND "
    "(? = 1 OR response_id IS NULL OR NOT EXISTS (SELECT 1 FROM responses x "
    "WHERE x.response_id = requests.response_id AND x.ok = 1))",
    // k_mark_killed: only called while holding the run lock, so no process
    // is writing any run still marked running.
    "UPDATE runs SET status = 'killed', finished_at = ? WHERE status = 'running'",
};
static_assert(std::size(k_statements) == 10);

class Transaction {
public:
    explicit Transaction(Database& db) : m_db(db) { m_ok = m_db.exec("BEGIN IMMEDIATE").ok(); }
    ~Transaction() {
        if (m_ok && !m_committed) {
            (void)m_db.exec("ROLLBACK");
        }
    }
    bool begun() const { return m_ok; }
    util::Result<void> commit() {
        auto r = m_db.exec("COMMIT");
        m_committed = r.ok();
        return r;
    }

private:
    Database& m_db;
    bool m_ok = false;
    bool m_committed = false;
};

} // namespace

util::Result<void> check_db_file(const std::string& path, Store::Mode mode) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(st)) {
        return {};
    }
    if (std::filesystem::is_directory(st)) {
        return make_error(ErrorKind::data,
                          fmt::format("{} is a directory; pass a database file to --db", path));
    }
    if (!std::filesystem::is_regular_file(st)) {
        return make_error(
            ErrorKind::data,
            fmt::format("{} is not a regular file; pass a database file to --db", path));
    }
    if (access(path.c_str(), R_OK) != 0) {
        return make_error(ErrorKind::data, fmt::format("cannot read {}: {}; check its permissions",
                                                       path, std::strerror(errno)));
    }
    if (mode == Store::Mode::read_write && access(path.c_str(), W_OK) != 0) {
        return make_error(ErrorKind::data,
                          fmt::format("cannot write {}: {}; diffeval stores scores and responses "
                                      "in it, so it must be writable",
                                      path, std::strerror(errno)));
    }
    return {};
}

std::string now_iso8601() {
    auto now = std::chrono::system_clock::now();
    auto secs = std::chrono::system_clock::to_time_t(now);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

util::Result<std::unique_ptr<Store>> Store::open(const std::string& path, Mode mode) {
    // A --db that cannot be a database is the user's to fix (exit 2), found
    // before SQLite tries and fails with a less helpful message.
    const bool existed = std::filesystem::exists(path);
    if (auto r = check_db_file(path, mode); !r) {
        return r.error();
    }
    std::unique_ptr<Store> s(new Store());
    s->m_path = path;
    auto create = mode == Mode::read_write ? Database::Create::yes : Database::Create::no;
    if (auto r = s->m_db.open(path, create); !r) {
        return make_error(existed ? ErrorKind::data : ErrorKind::usage, r.error().message);
    }
    // Reads go through a memory map (up to 1 GiB of the file): analysis
    // passes over every response then skip a copy of each page.
    if (auto r = s->m_db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                              "PRAGMA foreign_keys=ON;");
        !r) {
        return make_error(ErrorKind::data, fmt::format("{} is not a diffeval database ({})", path,
                                                       r.error().message));
    }
    if (auto r = s->migrate(mode); !r) {
        return r.error();
    }
    if (auto r = s->prepare(); !r) {
        return r.error();
    }
    return s;
}

util::Result<void> Store::migrate(Mode mode) {
    Statement v(m_db.handle(), "PRAGMA user_version");
    if (!v.valid() || !v.step()) {
        return make_error(ErrorKind::data, fmt::format("{} is not a SQLite database", m_path));
    }
    int from = static_cast<int>(v.column_int(0));
    v.reset();
    if (from > k_schema_version) {
        return make_error(ErrorKind::data,
                          fmt::format("{} has schema version {}, newer than this diffeval ({}); "
                                      "upgrade diffeval",
                                      m_path, from, k_schema_version));
    }
    if (from == k_schema_version) {
        m_version = from;
        return {};
    }
    if (from == 0) {
        Statement tables(m_db.handle(), "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
        if (tables.step() && tables.column_int(0) > 0) {
            return make_error(ErrorKind::data,
                              fmt::format("{} is a SQLite database but not diffeval's; choose "
                                          "another --db file",
                                          m_path));
        }
    }
    if (mode == Mode::read_only) {
        return make_error(ErrorKind::data,
                          fmt::format("{} has schema version {}; run 'diffeval run' or "
                                      "'diffeval rescore' once to migrate it",
                                      m_path, from));
    }
    Transaction tx(m_db);
    if (!tx.begun()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot lock {}: {}", m_path, m_db.last_error()));
    }
    // The ladder: each rung takes the schema from version N-1 to N.
    if (from < 1) {
        if (auto r = m_db.exec(k_schema_v1); !r) {
            return r.error();
        }
    }
    if (from < 2) {
        if (auto r = m_db.exec(k_schema_v2); !r) {
            return r.error();
        }
    }
    if (from < 4) {
        if (auto r = m_db.exec(k_schema_v4); !r) {
            return r.error();
        }
    }
    if (auto r = m_db.exec(fmt::format("PRAGMA user_version = {}", k_schema_version)); !r) {
        return r.error();
    }
    if (auto r = tx.commit(); !r) {
        return r.error();
    }
    m_version = k_schema_version;
    return {};
}

util::Result<void> Store::prepare() {
    for (int i = 0; i < k_count_statements; ++i) {
        m_stmts[i] = Statement(m_db.handle(), k_statements[i]);
        if (!m_stmts[i].valid()) {
            return make_error(ErrorKind::internal, fmt::format("cannot prepare statement {}: {}", i,
                                                               m_stmts[i].error()));
        }
    }
    return {};
}

util::Result<int64_t> Store::begin_run(const std::string& config_json, const std::string& dataset) {
    if (!m_stmts[k_insert_run].bind(now_iso8601(), dataset, config_json, DIFFEVAL_VERSION).run()) {
        return make_error(ErrorKind::io, fmt::format("cannot record run: {}", m_db.last_error()));
    }
    return static_cast<int64_t>(sqlite3_last_insert_rowid(m_db.handle()));
}

util::Result<void> Store::end_run(int64_t run_id, const std::string& status) {
    if (!m_stmts[k_end_run].bind(now_iso8601(), status, run_id).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record run end: {}", m_db.last_error()));
    }
    return {};
}

util::Result<int64_t> Store::mark_stale_runs_killed() {
    if (!m_stmts[k_mark_killed].bind(now_iso8601()).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot mark earlier runs killed: {}", m_db.last_error()));
    }
    return static_cast<int64_t>(sqlite3_changes(m_db.handle()));
}

util::Result<void> Store::put_server(const ServerRow& s) {
    if (!m_stmts[k_put_server].bind(s.name, s.url, s.model, s.info_json).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record server: {}", m_db.last_error()));
    }
    return {};
}

util::Result<void> Store::put_server_log(const std::string& name, const std::string& log_path,
                                         const std::string& log_text,
                                         const std::string& facts_json) {
    auto facts =
        facts_json.empty() ? std::optional<std::string>{} : std::optional<std::string>{facts_json};
    if (!m_stmts[k_put_server_log].bind(log_path, log_text, facts, name).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot record server log: {}", m_db.last_error()));
    }
    return {};
}

util::Result<void>
Store::put_questions(const std::string& dataset,
                     const std::vector<std::pair<std::string, std::string>>& qa) {
    Transaction tx(m_db);
    for (size_t i = 0; i < qa.size(); ++i) {
        if (!m_stmts[k_put_question]
                 .bind(dataset, static_cast<int64_t>(i), qa[i].first, qa[i].second)
                 .run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot store questions: {}", m_db.last_error()));
        }
    }
    return tx.commit();
}

util::Result<void> Store::put_requests(const std::vector<RequestRow>& rows) {
    Transaction tx(m_db);
    auto& st = m_stmts[k_put_request];
    for (const auto& r : rows) {
        if (!st.bind(r.key, r.server, r.framing, r.max_tokens, r.repeat, r.question_idx, r.dataset,
                     r.body_sha256, r.body)
                 .run()) {
            return make_error(ErrorKind::io, fmt::format("cannot store requests: {}", st.error()));
        }
    }
    return tx.commit();
}

util::Result<std::unordered_set<std::string>> Store::completed_keys() {
    std::unordered_set<std::string> out;
    auto& st = m_stmts[k_completed_keys];
    st.reset();
    while (st.step()) {
        out.insert(st.column_text(0));
    }
    if (!st.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", st.error()));
    }
    st.reset();
    return out;
}

util::Result<void> Store::write_batch(const std::vector<ResponseRow>& rows) {
    if (m_fail_writes > 0) {
        --m_fail_writes;
        return make_error(ErrorKind::io, "database write failed (injected by test)");
    }
    Transaction tx(m_db);
    if (!tx.begun()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot write responses: {}", m_db.last_error()));
    }
    auto& ins = m_stmts[k_insert_response];
    auto& point = m_stmts[k_point_request];
    for (const auto& r : rows) {
        ins.bind(
            r.run_id > 0 ? std::optional<int64_t>(r.run_id) : std::nullopt, r.ok ? 1 : 0, r.status,
            r.response_json, r.text, r.reasoning, r.finish_reason, r.stop_reason, r.prompt_tokens,
            r.completion_tokens, r.attempts, r.latency_ms, r.ttft_ms, r.streamed ? 1 : 0,
            r.token_gaps_json, r.started_at,
            r.error.empty() ? std::optional<std::string>{} : std::optional<std::string>{r.error},
            r.error_kind.empty() ? std::optional<std::string>{}
                                 : std::optional<std::string>{r.error_kind},
            r.notes.empty() ? std::optional<std::string>{} : std::optional<std::string>{r.notes},
            r.redacted ? 1 : 0, r.key);
        if (!ins.run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write responses: {}", ins.error()));
        }
        if (!point.bind(r.key, r.ok ? 1 : 0).run()) {
            return make_error(ErrorKind::io,
                              fmt::format("cannot write responses: {}", point.error()));
        }
    }
    return tx.commit();
}

Writer::Writer(Store& store) : m_store(store), m_thread([this] { loop(); }) {}

Writer::~Writer() {
    close();
}

void Writer::push(ResponseRow row) {
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(row));
    }
    m_wake.notify_one();
}

void Writer::flush() {
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [this] { return m_queue.empty() && !m_busy; });
}

void Writer::close() {
    {
        std::lock_guard lock(m_mutex);
        if (m_stop) {
            return;
        }
        m_stop = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

std::optional<std::string> Writer::error() const {
    std::lock_guard lock(m_mutex);
    return m_error;
}

int64_t Writer::committed() const {
    std::lock_guard lock(m_mutex);
    return m_committed;
}

void Writer::loop() {
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait(lock, [this] { return m_stop || !m_queue.empty(); });
        if (m_queue.empty() && m_stop) {
            break;
        }
        std::vector<ResponseRow> batch;
        batch.swap(m_queue);
        m_busy = true;
        lock.unlock();
        auto r = m_store.write_batch(batch);
        if (!r) {
            // Keep the rows and try once more before reporting: a transient
            // lock by a reader should not lose responses.
            r = m_store.write_batch(batch);
        }
        lock.lock();
        m_busy = false;
        if (r) {
            m_committed += static_cast<int64_t>(batch.size());
        } else if (!m_error) {
            m_error = r.error().message;
        }
        m_done.notify_all();
    }
    m_done.notify_all();
}

} // namespace diffeval::store
