// The results store: every request diffeval sends and every response it gets,
// in one SQLite file that later stages (classify, score, analyse, report,
// gate) read. Opening migrates an older schema forward.
#pragma once

#include <harness/store/server_identity.hpp>
#include <harness/store/sqlite.hpp>
#include <harness/util/result.hpp>
#include <harness/util/stop_reason.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

namespace diffeval::store {

// The content hash that identifies a question across datasets and runs:
// lower-case hex sha256 of its text, a NUL byte, and its gold answer.
std::string question_hash(std::string_view question, std::string_view answer);

// Remove the SQLite file at `path` with its -wal, -shm and -journal files;
// files that are not there are no error.
void remove_with_sidecars(const std::string& path);

// Whether writing `path` would write the database `db`: its own file, its
// -wal, -shm, -journal or lock file, by name or by a link to it. An output
// there (`gate --junit r.sqlite`) would replace the stored results. An
// empty `db` names none.
bool names_database(const std::string& path, const std::string& db);

// A request's identity (requests.request_key): the sha256 of what identifies
// it and its body's bytes, so a changed body is a new request and an
// unchanged one resumes. diffeval's runs and imported results key alike.
std::string request_key(std::string_view server, std::string_view framing, int max_tokens,
                        int repeat, int64_t question_idx, std::string_view body_sha256);

// A request as planned: its identity and exact body.
struct RequestRow {
    std::string key; // stable: hash of identity and body
    std::string server;
    std::string framing;
    int max_tokens = 0;
    int repeat = 0;
    int question_idx = 0;
    std::string dataset;
    std::string body;
    std::string body_sha256;
    // How many leading bytes of `body` other bodies share (a framing's
    // few-shot block): stored once in body_prefixes (schema v12). 0: none.
    size_t prefix_bytes = 0;
    // A probe's request (schema v8, docs/probe.md): its step in the chain
    // (0: the framing's prompt, 1: the prompt and the chain whitespace), or
    // -1 for a measured request. Probes go to probe_requests, never counted
    // as answers.
    int probe_step = -1;
    std::string probe; // the probe's name, "think-open"
};

// What a probe response listed at its first position (docs/probe.md).
struct ProbeReadingRow {
    std::string chosen;
    std::string top_json; // [[token, logprob], ...], most likely first
    double p_marker = 0;
    bool marker_listed = false;
    double p_whitespace = 0;
    bool whitespace_listed = false;
    double floor = 0; // the smallest listed probability
};

// What one send of a request (with its retries) ended in.
// A response's classification and scores, computed before it is stored (a
// run scores as it stores: analysis::ResponseScorer) and written with it in
// one transaction. Without them the scoring stage computes them later.
struct DerivedRows {
    bool opened = false;
    bool closed = false;
    bool reasoning_started = false;
    std::string outcome;
    std::string stop_cause; // "" is stored as NULL: no stop
    struct Score {
        std::string scorer;
        int64_t scorer_version = 0;
        std::string score_text; // "full" or "after-think"
        std::string extracted;
        bool valid = false;
        bool correct = false;
    };
    std::vector<Score> scores;
};

struct ResponseRow {
    std::string key; // the request's key
    int64_t run_id = 0;
    bool ok = false;           // a parsed successful response
    int status = 0;            // HTTP status, 0 when no response arrived
    std::string response_json; // the raw body as received
    std::optional<std::string> text;
    std::optional<std::string> reasoning;
    std::optional<std::string> finish_reason;
    util::StopReason stop_reason;
    // The response field the stop was named in: "stop_reason" (vLLM),
    // "matched_stop" (SGLang), "finish_reason" (TGI's eos_token and
    // stop_sequence), "__verbose.stop_type" (llama.cpp started with
    // --verbose); "" when the server sent none (llama.cpp by default).
    std::string stop_field;
    std::optional<int64_t> prompt_tokens;
    std::optional<int64_t> completion_tokens;
    int attempts = 0;
    // From the request leaving to the answer's last byte; unset when nothing
    // measured it (an answer imported from lm-eval samples).
    std::optional<double> latency_ms;
    std::optional<double> ttft_ms;
    bool streamed = false;
    std::optional<std::string> token_gaps_json; // streamed: ms between content chunks
    std::string started_at;                     // ISO 8601 UTC
    std::string error;                          // empty when ok
    std::string error_kind; // "", "http", "transport", "timeout", "parse", "stream", "size"
    bool probe = false;     // the answer to a probe request: goes to probe_responses
    std::optional<ProbeReadingRow> reading; // a probe's reading, when ok
    std::string notes;     // what was set aside from the response (e.g. a bad token count)
    bool redacted = false; // a secret was replaced in a stored field
    std::optional<DerivedRows> derived; // a measured response's, when computed already
    int question_idx = -1;  // the request's test question, for Writer's Prepare (-1: unknown)
    int64_t request_id = 0; // its request's row id (0: found by key, reading the table)
};

struct ServerRow {
    std::string name;
    std::string url;
    std::string model;
    std::string info_json; // what the server said about itself
};

// The store. Reads happen on the caller's thread; writes of responses go
// through write_batch (the engine's writer thread calls it).
class Store {
public:
    enum class Mode { read_write, read_only };

    // Open or create `path`, migrating its schema to k_schema_version. A file
    // from a newer diffeval, or another program's, is refused rather than
    // touched; a file this call created and could not finish is removed.
    static util::Result<std::unique_ptr<Store>> open(const std::string& path, Mode mode);

    // True when `path` is an SQLite file with no table and schema version 0
    // (as `sqlite3 FILE` or another tool leaves it): opening it for writing
    // would write diffeval's schema into it.
    static bool holds_no_schema(const std::string& path);

    int schema_version() const { return m_version; }
    sqlite3* handle() const { return m_db.handle(); }
    const std::string& path() const { return m_path; }
    // True when path() no longer names the file this store opened (it was
    // deleted, renamed or replaced): write_batch then refuses (k_moved).
    bool moved() const { return has_moved(m_db.handle()); }

    // Record a run's start with its effective configuration (no secrets).
    util::Result<int64_t> begin_run(const std::string& config_json, const std::string& dataset);
    // Record the end of run `run_id` with `status`, unless its end is
    // recorded already.
    util::Result<void> end_run(int64_t run_id, const std::string& status);
    // True when no response (nor probe response) is stored; false also when
    // that cannot be read.
    bool holds_no_responses();
    // Record that run `run_id` failed (end_run) on a disk that may be full:
    // when the row cannot be written, the write-ahead log is checkpointed
    // into the file and emptied, which gives the row room, and it is
    // written again. False when it still could not be.
    bool mark_run_failed(int64_t run_id);
    // How many responses (probe responses included) run `run_id` stored; 0
    // when they cannot be counted.
    int64_t run_responses(int64_t run_id);
    // Remove run `run_id`'s row when no response (nor probe response) of it
    // is stored: a run refused at planning asked for nothing this database
    // can hold, and its row would count its places as never planned. Its
    // dataset's questions go too when nothing else holds that dataset. True
    // when the row went.
    bool forget_run(int64_t run_id);
    // Mark every run still `running` as `killed`; returns how many. Call only
    // while holding the database's RunLock: then no such run has a process.
    util::Result<int64_t> mark_stale_runs_killed();

    util::Result<void> put_server(const ServerRow& server);
    // What this database recorded of server `name`, when it holds a response
    // to one of its requests or probe requests; nullopt otherwise.
    util::Result<std::optional<ServerIdentity>> answered_server(const std::string& name);
    // Attach a server's log and its fingerprint (`facts_json`, "" for none).
    // Without a log (`log_text` empty), a log stored before is kept with its
    // facts, and false is returned; without facts either, the row is left
    // as it is.
    util::Result<bool> put_server_log(const std::string& name, const std::string& log_path,
                                      const std::string& log_text, const std::string& facts_json);
    // Replace server `name`'s fingerprint (`facts_json`) alone, its log as
    // stored: a conflict found after the run.
    util::Result<void> put_server_facts(const std::string& name, const std::string& facts_json);
    // A question stored under a dataset's name, at its index.
    struct StoredQuestion {
        int64_t question_idx = 0;
        std::string question;
        std::string answer;
    };
    // Store `qa` (question, gold answer) as the questions of `dataset`,
    // numbered from 0; those already stored are kept. When a stored one's
    // text or answer is not `qa`'s at its index (the file changed since),
    // stores nothing and returns the first such; nullopt otherwise.
    util::Result<std::optional<StoredQuestion>>
    put_questions(const std::string& dataset,
                  const std::vector<std::pair<std::string, std::string>>& qa);
    // The question stored under `dataset` at `question_idx`; nullopt when
    // there is none.
    util::Result<std::optional<StoredQuestion>> stored_question(const std::string& dataset,
                                                                int64_t question_idx);
    // The body stored for the request (not a probe's) whose key is `key`,
    // for a refusal's words; "" when none is, or it cannot be read.
    std::string request_body(const std::string& server, const std::string& framing, int max_tokens,
                             int repeat, int64_t question_idx, const std::string& key);
    // What put_requests and put_unanswered found of a planned request.
    struct Planned {
        bool answered = false; // it has a successful response already
        int64_t id = 0;        // its request_id (probe_request_id for a probe)
    };
    // Insert planned requests (probes included), each body once per distinct
    // `body_sha256`; existing keys are kept as they are. Rows of one body come
    // together, and only the first of them need carry it. Returns what was
    // found of each row, in their order: its id is what a ResponseRow
    // answering it takes as its request_id.
    util::Result<std::vector<Planned>> put_requests(const std::vector<RequestRow>& rows);
    // Keys of requests (probes included) that already have a successful
    // response.
    util::Result<std::unordered_set<std::string>> completed_keys();
    // A place (repeat, question) a group holds a request in, with that
    // request's key, dataset and question hash.
    struct StoredPlace {
        int64_t question_idx = 0;
        int repeat = 0;
        std::string request_key;
        std::string dataset;
        std::string question_sha256; // "" when its question's row is missing
    };
    // Each place of the group `server`/`framing`/`max_tokens`, by repeat,
    // then question (the first is the group's first place); `visit` returns
    // false to stop. So a run compares the stored places before sending.
    using PlaceVisitor = std::function<bool(const StoredPlace&)>;
    util::Result<void> for_each_stored_place(const std::string& server, const std::string& framing,
                                             int max_tokens, const PlaceVisitor& visit);
    // Whether a run of another dataset than `dataset` is stored: only then
    // can a stored place hold another question than `dataset` has at its
    // index, since put_questions compares `dataset`'s own stored questions.
    util::Result<bool> holds_other_dataset(const std::string& dataset);
    // Whether any request (measured or probe) asked question `question_idx`
    // of `dataset`.
    util::Result<bool> asked(const std::string& dataset, int64_t question_idx);
    // How many requests of `servers` have a response (of any outcome).
    util::Result<int64_t> answered_requests(const std::vector<std::string>& servers);
    // Of the places of `server`'s group `framing`/`max_tokens` on `dataset`
    // (repeats below `repeats`, questions below `questions`, in shard
    // `shard_index` of `shard_count` when that is above 0), those whose
    // counted response succeeded: a plan of them all has nothing to send.
    util::Result<int64_t> answered_places(const std::string& server, const std::string& dataset,
                                          const std::string& framing, int64_t max_tokens,
                                          int64_t repeats, int64_t questions, int64_t shard_index,
                                          int64_t shard_count);
    // The latest run of `dataset` whose config_json records `key` (a text):
    // its id and that text; nullopt when none does.
    util::Result<std::optional<std::pair<int64_t, std::string>>>
    latest_run_recording(const std::string& dataset, const std::string& key);
    // A probe request's place: probe step, repeat and question, with its
    // key.
    struct StoredProbePlace {
        int64_t question_idx = 0;
        int repeat = 0;
        int step = 0;
        std::string request_key;
    };
    // Each probe place of `probe` for `server`/`framing`, by repeat, then
    // question; `visit` returns false to stop.
    using ProbePlaceVisitor = std::function<bool(const StoredProbePlace&)>;
    util::Result<void> for_each_stored_probe_place(const std::string& probe,
                                                   const std::string& server,
                                                   const std::string& framing,
                                                   const ProbePlaceVisitor& visit);
    // For a plan read a part at a time, in one transaction: `read` fills the
    // (cleared) vector it is given with the next few rows (probes included)
    // and returns false when it has none; each such batch is stored as
    // put_requests does and handed to `take` with what was found of each
    // row, in their order: whether it already had a successful response,
    // and its row id. Only one batch's bodies are in memory at a time.
    // With Wait::no, when the Writer's thread is storing a batch it
    // returns false at once, having read and stored nothing, instead of
    // waiting for the batch's commit; otherwise true.
    using ReadRows = std::function<bool(std::vector<RequestRow>&)>;
    using TakeRows = std::function<void(std::vector<RequestRow>&, const std::vector<Planned>&)>;
    enum class Wait { yes, no };
    util::Result<bool> put_unanswered(const ReadRows& read, const TakeRows& take,
                                      Wait wait = Wait::yes);
    // Write `rows` in one transaction.
    util::Result<void> write_batch(const std::vector<ResponseRow>& rows);

    // Test seam: create a database at `path` with the schema of an older
    // `version` (what that diffeval wrote), to test migrations.
    static util::Result<void> create_at_version(const std::string& path, int version);

    // Whether SQLite checks each written row's references (PRAGMA
    // foreign_keys; on when opened). A run turns it off: every id it writes
    // was just read from or inserted into this database, and the checks were
    // a twentieth of the run's CPU (six index lookups a response).
    util::Result<void> check_references(bool on);

    // Test seam: make the next `n` response writes fail.
    void fail_next_writes(int n) { m_fail_writes = n; }
    // Test seam: take the turn a write_batch takes, for as long as the lock
    // is held.
    std::unique_lock<std::mutex> hold_turn() { return std::unique_lock(m_turn); }

private:
    Store() = default;
    // open's work on `path`, which `existed` before it (what a failure to
    // open is called depends on it).
    static util::Result<std::unique_ptr<Store>> open_at(const std::string& path, Mode mode,
                                                        bool existed);
    // Refuse a file that is not diffeval's (another program's tables, a
    // schema version no diffeval wrote) or is newer than this diffeval,
    // before anything writes to it.
    util::Result<void> identify();
    util::Result<void> migrate(Mode mode);
    util::Result<void> prepare();
    // Run the migration ladder from schema `from` up to `to` (no transaction
    // of its own).
    util::Result<void> climb(int from, int to);
    // Refuse request `r`, just stored as row `id` with `body`, when another
    // request holds its place.
    util::Result<void> check_slot(const RequestRow& r, const std::string& body, int64_t id);
    // Per server, framing and token limit: whether the database held
    // requests of it before this store's first new one (only then can a
    // new request's place be taken). A run has a few such groups: a list,
    // searched without building a key for each request.
    struct GroupSeen {
        std::string server, framing;
        int max_tokens = 0;
        bool stored_before = false;
    };
    std::vector<GroupSeen> m_groups_seen;
    // Whether a request new to the database is refused in a place another
    // request holds (check_slot): a run checks, and an import has checked
    // all its rows before.
    enum class Places { checked, kept };
    // Store `rows` (a transaction is open) and say in `planned` (one per
    // row) what each was.
    util::Result<void> insert_requests(const std::vector<RequestRow>& rows,
                                       std::vector<Planned>& planned, Places places);
    // The id of the body `sha256` (`body`, of which the first `prefix_bytes`
    // are a shared prefix), stored now when new; a stored body is kept as it
    // is.
    util::Result<int64_t> put_body(const std::string& sha256, const std::string& body,
                                   size_t prefix_bytes);
    // The id of the stored prefix `text`, stored now when new.
    util::Result<int64_t> put_prefix(std::string_view text);
    // The derived rows of response `response_id` (write_batch's transaction
    // is open).
    util::Result<void> write_derived(int64_t response_id, const DerivedRows& derived);
    // One probe response of a batch (write_batch's transaction is open).
    util::Result<void> write_probe_response(const ResponseRow& row);
    // Schema v3: hash every stored question and give each request its hash.
    util::Result<void> backfill_question_hashes();
    // Version 13's rung: responses.latency_ms loses its NOT NULL; see
    // k_schema_v13.
    util::Result<void> allow_null_latency();
    // Version 16's rung: the key's UNIQUE index goes from both request
    // tables; see k_schema_v16.
    util::Result<void> drop_key_indexes();

    enum StatementId {
        k_insert_run,
        k_end_run,
        k_put_server,
        k_put_server_log,
        k_put_question,
        k_question_indices,
        k_question_at,
        k_put_body,
        k_body_id,
        k_put_request,
        k_completed_keys,
        k_existing,
        k_slot_taken,
        k_group_stored,
        k_group_places,
        k_probe_places,
        k_other_dataset,
        k_existing_probe,
        k_request_id,
        k_insert_response,
        k_point_request,
        k_put_probe_request,
        k_probe_request_id,
        k_insert_probe_response,
        k_point_probe_request,
        k_mark_killed,
        k_put_classification,
        k_put_score,
        k_put_prefix,
        k_prefix_id,
        k_count_statements
    };
    // The id of the row `find` (k_request_id, k_probe_request_id) finds for
    // `key`; nullopt when there is none.
    util::Result<std::optional<int64_t>> row_id(StatementId find, const std::string& key);

    Database m_db;
    std::string m_path;
    int m_version = 0;
    Statement m_stmts[k_count_statements];
    int m_fail_writes = 0;
    // The last prefixes put_prefix gave (a few: one per framing and probe
    // step, which a plan takes in turn for each question), with their ids,
    // within the transaction put_unanswered or put_requests has open.
    // Cleared as each begins, so an id a rolled-back transaction made is
    // never reused.
    std::vector<std::pair<std::string, int64_t>> m_recent_prefixes;
    // The run's event loop plans (put_unanswered) while the Writer's thread
    // stores responses (write_batch), over this one connection: they and
    // put_requests take turns.
    std::mutex m_turn;
};

// While a run writes, the WAL is checkpointed by a thread of its own, on a
// connection of its own, instead of inside the commit that passes SQLite's
// threshold (1,000 pages): a checkpoint copies pages into the database file
// and syncs it. Inside a commit it held the store's one connection, so the
// run's planning waited for it and its servers went idle (79 syncs, up to
// 30 ms each and 0.85 s in all, in one official demo); on the writer's
// thread it held up the writer, whose backlog then stopped the event loop
// from sending. In WAL mode a checkpoint and commits run side by side: the
// checkpoint copies the frames committed before it began, commits append
// after them, and a commit after a checkpoint that copied everything starts
// the WAL over. Past four times the threshold (64 MB) the writer waits for
// the checkpoint thread before its next batch, so a disk slower than the
// run holds the writer back and the WAL stays near 64 MB; the event loop
// never waits for a checkpoint. Past 16 times, as a last resort against
// planning's commits, the committing connection checkpoints itself, as
// SQLite would.
class Checkpointer {
public:
    explicit Checkpointer(Store& store);
    // Stops the checkpoint thread and gives the store its automatic
    // checkpoints back.
    ~Checkpointer();
    Checkpointer(const Checkpointer&) = delete;
    Checkpointer& operator=(const Checkpointer&) = delete;

    // Wake the checkpoint thread when the WAL has passed the threshold since
    // the last checkpoint. Never waits for the disk.
    void run_if_due();
    // When the WAL holds four times the threshold (copied or not) and some
    // of it is not yet copied, wait for the checkpoint thread to copy it (the
    // writer's thread, between batches).
    void wait_for_room();

private:
    // sqlite3_wal_hook: called after each commit with the WAL's frames.
    static int on_commit(void* self, sqlite3* db, const char* name, int frames);
    // Frames committed and not yet copied by a checkpoint.
    int pending() const;
    void loop();

    Store& m_store;
    Database m_db; // the checkpoints' own connection, used by m_thread only
    bool m_hooked = false;
    std::atomic<int> m_frames = 0;          // in the WAL after the last commit
    std::atomic<int> m_backfilled = 0;      // of those, copied by a checkpoint
    std::atomic<uint64_t> m_generation = 0; // times the WAL started over
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done; // a round of checkpoints ended
    uint64_t m_rounds = 0;
    bool m_due = false;
    bool m_stop = false;
    std::thread m_thread;
};

// The single writer: responses are queued from the event loop and committed
// by a background thread in batched transactions, so the network loop never
// waits for the disk and a crash loses at most the batch in flight. A batch
// gathers for up to k_batch_window (or k_batch_rows rows): every commit
// rewrites the pages of the indexes it touches, so many tiny commits cost
// most of a fast run's system time.
class Writer {
public:
    // Called on the writer's thread with each row before it is stored.
    using Prepare = std::function<void(ResponseRow& row)>;

    // `prepare` (optional) completes each row before it is written: a run
    // derives its classification and scores there, off the network thread.
    explicit Writer(Store& store, Prepare prepare = {});
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    void push(ResponseRow row);
    // Block until everything pushed so far is committed.
    void flush();
    // Flush and stop the thread.
    void close();
    // The first write error, if any (writes after it are still attempted).
    std::optional<std::string> error() const;
    int64_t committed() const;
    // Rows pushed and waiting for the next batch (not the one being written).
    size_t backlog() const;
    // Block until fewer than `rows` wait for the next batch (the writer takes
    // them all when it starts one) or `timeout` passes, nudging the writer.
    void wait_below(size_t rows, std::chrono::milliseconds timeout);
    // Commit what is queued now, without waiting for the batch window.
    void nudge();

private:
    void loop();

    Store& m_store;
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    std::vector<ResponseRow> m_queue;
    bool m_stop = false;
    bool m_busy = false;
    bool m_nudged = false;
    int m_flushing = 0; // flush() calls waiting: commit without gathering
    int64_t m_committed = 0;
    std::optional<std::string> m_error;
    Prepare m_prepare;
    std::optional<Checkpointer> m_checkpointer;
    std::thread m_thread;
};

// Whether `path` is a regular file that begins as every SQLite database does.
bool is_sqlite_file(const std::string& path);

// The database whose -wal, -shm, -journal or lock file `path` names (an
// SQLite file beside it by that name without the suffix), itself or through
// a symbolic link, or nullopt.
std::optional<std::string> database_of_side_file(const std::string& path);

// Whether `path` can be opened as a database in `mode`: a usage error when it
// names another database's side file (database_of_side_file); a data error
// when it is a directory, not a regular file, unreadable, (read_write)
// read-only, cut short, or beside a -wal that is not its log while no
// diffeval process writes it (wal_fit.hpp). A missing file passes (it will
// be created).
util::Result<void> check_db_file(const std::string& path, Store::Mode mode);

// Whether every page of `db` reads as SQLite wrote it (PRAGMA quick_check;
// a data error naming the damage when not): a damaged page of responses
// read as fewer rows, and a gate the intact file failed passed on it (a
// hostile-file audit). About 1 ms per MB: every command that reads results
// asks it (cli::open_existing_store), a run does not. What check_db_file refuses is
// refused as it words it; a missing file, or one SQLite cannot open as a
// database, passes, to be said where it is opened.
util::Result<void> check_pages(const std::string& db);

// check_pages without its check_db_file, for a caller that has just run
// that on `db` (cli::open_existing_store): the check reads a -wal whole.
util::Result<void> check_pages_of_checked_file(const std::string& db);

// Current UTC time as ISO 8601 with milliseconds.
std::string now_iso8601();

} // namespace diffeval::store
