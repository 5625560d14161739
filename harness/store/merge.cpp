// Merging results databases; see merge.hpp.
//
// Tables are copied by column name, over the columns both files have, so a
// merge keeps working as migrations add columns. Surrogate keys (run_id,
// request_id, response_id) are renumbered; request keys tie everything
// together. classifications and scores are derived and not copied: the
// first command that reads the merged file computes them. Users' scorers
// (table scorers) are copied, so that computation uses them too.
#include <harness/store/body_difference.hpp>
#include <harness/store/merge.hpp>
#include <harness/store/scoring.hpp>

#include <harness/store/lock.hpp>

#include <harness/store/server_identity.hpp>
#include <harness/store/sqlite.hpp>
#include <harness/store/store.hpp>
#include <harness/util/file.hpp>
#include <harness/util/pyjson.hpp>
#include <harness/util/text.hpp>
#include <harness/util/untrusted_json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

namespace {

namespace fs = std::filesystem;

// Whether a process (a run) still writes an input: its `running` rows are
// then true.
enum class InputWriter { running, none };

// Columns of `schema`.`table` as declared.
std::vector<std::string> columns(sqlite3* db, const std::string& schema, const std::string& table) {
    std::vector<std::string> out;
    Statement st(db, fmt::format("PRAGMA {}.table_info({})", schema, table));
    while (st.step()) {
        out.push_back(st.column_text(1));
    }
    return out;
}

// Columns `table` has in both databases, without `skip`.
std::vector<std::string> shared_columns(sqlite3* db, const std::string& table,
                                        const std::set<std::string>& skip) {
    auto theirs = columns(db, "src", table);
    std::vector<std::string> out;
    for (const auto& c : columns(db, "main", table)) {
        if (!skip.count(c) && std::find(theirs.begin(), theirs.end(), c) != theirs.end()) {
            out.push_back(c);
        }
    }
    return out;
}

std::string joined(const std::vector<std::string>& cols, const std::string& prefix) {
    std::string out;
    for (const auto& c : cols) {
        out += (out.empty() ? "" : ", ") + prefix + "\"" + c + "\"";
    }
    return out;
}

// The first row of `sql`, its `n_cols` columns as text; empty when none.
std::vector<std::string> first_row(sqlite3* db, const std::string& sql, int n_cols) {
    Statement st(db, sql);
    std::vector<std::string> out;
    if (st.step()) {
        for (int i = 0; i < n_cols; ++i) {
            out.push_back(st.column_text(i));
        }
    }
    return out;
}

// The first server `src` and main both hold under one name whose rows
// differ (first_difference): its name, what differs, main's value and src's;
// empty when none.
std::vector<std::string> differing_server(sqlite3* db) {
    Statement st(db, "SELECT s.name, m.url, m.model, m.info_json, m.facts_json, s.url, s.model, "
                     "s.info_json, s.facts_json FROM src.servers s JOIN main.servers m "
                     "ON m.name = s.name ORDER BY s.name");
    while (st.step()) {
        const auto main_server = server_identity(st.column_view(1), st.column_text(2),
                                                 st.column_view(3), st.column_text(4));
        const auto src_server = server_identity(st.column_view(5), st.column_text(6),
                                                st.column_view(7), st.column_text(8));
        if (auto d = first_difference(main_server, src_server)) {
            return {st.column_text(0), d->what, d->a, d->b};
        }
    }
    return {};
}

// How bodies `a` (main's: before) and `b` (src's: in it) of one group
// differ outside the prompt (body_difference.hpp), "" when they do not.
std::string body_difference(std::string_view a_text, std::string_view b_text) {
    const auto d = first_body_difference(a_text, b_text);
    return d ? fmt::format("{} before, {} in it", d->first, d->second) : std::string();
}

// `body` with the first occurrence of `question`, as its JSON text holds it
// (Python's escapes, as every body is written), cut out; nullopt when it
// does not hold it.
std::optional<std::string> without_question(std::string body, std::string_view question) {
    std::string escaped;
    util::append_json_escaped(escaped, question, util::JsonStringStyle::python);
    const auto at = body.find(escaped);
    if (escaped.empty() || at == std::string::npos) {
        return std::nullopt;
    }
    body.erase(at, escaped.size());
    return body;
}

// Whether main's questions of dataset `a` are `src`'s of dataset `b`, text
// and gold answer: one file under two names, as a dataset given by path is
// named by the path as written.
bool same_questions(sqlite3* db, const std::string& a, const std::string& b) {
    Statement st(db, "SELECT (SELECT count(*) FROM main.questions WHERE dataset = ?1) = (SELECT "
                     "count(*) FROM src.questions WHERE dataset = ?2) AND NOT EXISTS (SELECT 1 "
                     "FROM main.questions m LEFT JOIN src.questions s ON s.dataset = ?2 AND "
                     "s.question_idx = m.question_idx WHERE m.dataset = ?1 AND (s.question IS NOT "
                     "m.question OR s.answer IS NOT m.answer))");
    st.bind(a, b);
    return st.step() && st.column_int(0) == 1;
}

// The first group (server, framing, max_tokens) that both main and `src`
// hold and whose requests were sent with another configuration: another
// dataset, another body outside its prompt (a sampling setting, the model,
// streaming), or another prompt around the question (a framing whose
// bodies share their few-shot block). A run refuses to add such requests to a stored
// group (Planner::check_stored_groups); a merge is held to the same rule.
// nullopt when none; else the group and what differs.
struct GroupDifference {
    std::string group;
    std::string what;
    bool renamed = false; // only the dataset's name differs (same_questions)
};
std::optional<GroupDifference> differing_group(sqlite3* db) {
    Statement st(db,
                 "WITH sg AS (SELECT server, framing, max_tokens, min(request_id) AS id FROM "
                 "src.requests GROUP BY server, framing, max_tokens), mg AS (SELECT server, "
                 "framing, max_tokens, min(request_id) AS id FROM main.requests GROUP BY server, "
                 "framing, max_tokens) SELECT sg.server || '/' || sg.framing || '/' || "
                 "sg.max_tokens, mq.dataset, sq.dataset, coalesce(mp.text, '') || "
                 "mb.request_json, coalesce(sp.text, '') || sb.request_json, mp.text IS NOT NULL "
                 "OR sp.text IS NOT NULL, (SELECT question FROM main.questions x WHERE x.dataset "
                 "= mq.dataset AND x.question_idx = mq.question_idx), (SELECT question FROM "
                 "src.questions x WHERE x.dataset = sq.dataset AND x.question_idx = "
                 "sq.question_idx) FROM sg JOIN mg ON mg.server = sg.server AND mg.framing = "
                 "sg.framing AND mg.max_tokens = sg.max_tokens JOIN src.requests sq ON "
                 "sq.request_id = sg.id JOIN main.requests mq ON mq.request_id = mg.id JOIN "
                 "src.request_bodies sb ON sb.body_id = sq.body_id LEFT JOIN src.body_prefixes sp "
                 "ON sp.prefix_id = sb.prefix_id JOIN main.request_bodies mb ON mb.body_id = "
                 "mq.body_id LEFT JOIN main.body_prefixes mp ON mp.prefix_id = mb.prefix_id ORDER "
                 "BY sg.server, sg.framing, sg.max_tokens");
    while (st.step()) {
        if (st.column_text(1) != st.column_text(2)) {
            return GroupDifference{st.column_text(0),
                                   fmt::format("dataset '{}' before, '{}' in it", st.column_text(1),
                                               st.column_text(2)),
                                   same_questions(db, st.column_text(1), st.column_text(2))};
        }
        if (auto d = body_difference(st.column_view(3), st.column_view(4)); !d.empty()) {
            return GroupDifference{st.column_text(0), d};
        }
        // A framing whose bodies share a prefix (its few-shot block) sends
        // every question in the same prompt: the bodies without their
        // questions are equal. One that draws each question's shots has no
        // such prefix, and its prompts differ by question.
        if (st.column_int(5) == 0 || st.column_null(6) || st.column_null(7)) {
            continue;
        }
        const auto a = without_question(st.column_text(3), st.column_view(6));
        const auto b = without_question(st.column_text(4), st.column_view(7));
        if (a && b && *a != *b) {
            return GroupDifference{st.column_text(0),
                                   "another prompt around the question in it, from other "
                                   "few-shot examples, --num-shots, --gen-prefix, "
                                   "--fewshot-from or framing file"};
        }
    }
    return std::nullopt;
}

// The tables of one kind of request: the measured ones, and the
// decision-point probe's (docs/probe.md), merged alike.
struct Tables {
    std::string_view requests, request_id, responses;
    // A request's place, which its key hashes: the group index's columns,
    // which end with the key (the key has no index of its own since schema
    // version 16).
    std::array<std::string_view, 5> place;
};
constexpr Tables k_measured{"requests",
                            "request_id",
                            "responses",
                            {"server", "framing", "max_tokens", "repeat", "question_idx"}};
constexpr Tables k_probe{"probe_requests",
                         "probe_request_id",
                         "probe_responses",
                         {"probe", "server", "framing", "repeat", "question_idx"}};

// SQL that holds when rows `a` and `b` of `t`'s requests are one request:
// the same place and key, so that the group index finds it.
std::string same_request(const Tables& t, std::string_view a, std::string_view b) {
    std::string out;
    for (const auto column : t.place) {
        out += fmt::format("{0}.{2} = {1}.{2} AND ", a, b, column);
    }
    return out + fmt::format("{0}.request_key = {1}.request_key", a, b);
}

// What in `src` contradicts what is already merged, as one sentence.
std::string find_conflict(sqlite3* db) {
    auto server = differing_server(db);
    if (!server.empty()) {
        return fmt::format("server '{}' has {} {} there but {} here; give different runs "
                           "different server names",
                           server[0], server[1], server[2], server[3]);
    }
    if (auto group = differing_group(db); group && group->renamed) {
        // Shards run on machines whose checkouts sit at other paths.
        return fmt::format("group {} was sent with {}, the same questions under two names (a "
                           "dataset given as a path is named by the path as written); run every "
                           "shard with the same --dataset text, such as a path relative to "
                           "where each runs, or 'gsm8k' with DIFFEVAL_DATA set",
                           group->group, group->what);
    } else if (group) {
        return fmt::format("group {} was sent with another request configuration: {}; its "
                           "answers would not be comparable, so merge only runs of one "
                           "configuration per group, or run the other configuration under "
                           "another --server name",
                           group->group, group->what);
    }
    // A framing that draws each question's shots from the pool has no
    // prompt shared by its bodies, so the group check above cannot see two
    // pools; each run records its pool's hash, and a resumed run refuses
    // another (engine/run.cpp), as the merge does.
    auto pool = first_row(
        db,
        "SELECT s.dataset, s.run_id, m.run_id FROM src.runs s JOIN main.runs m ON m.dataset = "
        "s.dataset WHERE json_valid(s.config_json) AND json_valid(m.config_json) AND "
        "s.config_json ->> '$.fewshot_pool_sha256' != m.config_json ->> '$.fewshot_pool_sha256' "
        "ORDER BY s.run_id, m.run_id LIMIT 1",
        3);
    if (!pool.empty()) {
        return fmt::format("dataset '{}' drew its few-shot examples from one pool before (run "
                           "{}) and from another in it (its run {}), so their prompts differ and "
                           "their answers are not paired; merge only runs of one few-shot file",
                           pool[0], pool[2], pool[1]);
    }
    // The probe's places, as a run checks them: a server's probe readings of
    // a question in another dataset or configuration would be read as the
    // same question's (the analysis keys readings by question index).
    if (!first_row(db, "SELECT 1 FROM src.sqlite_master WHERE name = 'probe_requests'", 1)
             .empty()) {
        auto probe = first_row(
            db,
            "SELECT s.probe, s.server, s.framing, s.question_idx, s.repeat FROM "
            "src.probe_requests s JOIN main.probe_requests m ON m.probe = s.probe AND m.server = "
            "s.server AND m.framing = s.framing AND m.repeat = s.repeat AND m.question_idx = "
            "s.question_idx AND m.step = s.step WHERE m.request_key != s.request_key LIMIT 1",
            5);
        if (!probe.empty()) {
            const auto& f = probe;
            return fmt::format("probe {} of {}/{} question {} (repeat {}) was sent with another "
                               "request body (another dataset or configuration) there than "
                               "here; merge only probes of one configuration per server, or "
                               "run the other under another --server name",
                               f[0], f[1], f[2], f[3], f[4]);
        }
    }
    auto question = first_row(db,
                              "SELECT s.dataset, s.question_idx, m.question != s.question "
                              "FROM src.questions s "
                              "JOIN main.questions m USING (dataset, question_idx) "
                              "WHERE m.question != s.question OR m.answer != s.answer LIMIT 1",
                              3);
    if (!question.empty()) {
        const auto& f = question;
        return fmt::format("dataset '{}' question {} has {} there than here; they were not run "
                           "on the same questions",
                           f[0], f[1], f[2] == "1" ? "another text" : "another gold answer");
    }
    auto scorer = first_row(db,
                            "SELECT s.name FROM src.scorers s JOIN main.scorers m USING (name) "
                            "WHERE m.definition != s.definition LIMIT 1",
                            1);
    if (!scorer.empty()) {
        return fmt::format("scorer '{}' has another definition there than here; rescore both "
                           "with the same --scorer-file and merge again",
                           scorer[0]);
    }
    auto request =
        first_row(db,
                  "SELECT s.request_key, m.dataset, s.dataset FROM src.requests s "
                  "JOIN main.requests m ON " +
                      same_request(k_measured, "m", "s") + " WHERE m.dataset != s.dataset LIMIT 1",
                  3);
    if (!request.empty()) {
        const auto& f = request;
        return fmt::format("request {} belongs to dataset '{}' there but '{}' here",
                           f[0].substr(0, 12), f[1], f[2]);
    }
    return "";
}

// The single integer `sql` returns; the statement is finished before return
// so it holds no lock.
int64_t count(sqlite3* db, const std::string& sql) {
    Statement st(db, sql);
    return st.step() ? st.column_int(0) : 0;
}

int64_t changes(sqlite3* db) {
    return static_cast<int64_t>(sqlite3_changes64(db));
}

// Runs (one row per run, recognised by its start and configuration), the
// map of their ids, servers and questions. A run main holds as `running`
// takes the status the input now gives it: merged while its shard still
// ran, it has ended since. A `running` row of an input no process writes is
// a run whose process died: it is `killed`, as the next run into that input
// would mark it (a run that took the input's lock just after it was looked
// at, and is read `killed`, takes its true status at the next merge).
util::Result<void> merge_runs(Database& db, InputWriter writer) {
    sqlite3* h = db.handle();
    auto exec = [&](const std::string& sql) { return db.exec(sql); };
    auto run_cols = shared_columns(h, "runs", {"run_id", "status"});
    const std::string status = writer == InputWriter::none
                                   ? "CASE s.status WHEN 'running' THEN 'killed' ELSE s.status END"
                                   : "s.status";
    std::vector<std::string> steps = {
        fmt::format("INSERT INTO main.runs ({0}, status) SELECT {1}, {2} FROM src.runs s WHERE "
                    "NOT EXISTS (SELECT 1 FROM main.runs m WHERE m.started_at = s.started_at AND "
                    "m.config_json = s.config_json) ORDER BY s.run_id",
                    joined(run_cols, ""), joined(run_cols, "s."), status),
        fmt::format("UPDATE main.runs SET (status, finished_at) = (SELECT {0}, s.finished_at "
                    "FROM src.runs s WHERE s.started_at = runs.started_at AND s.config_json = "
                    "runs.config_json ORDER BY s.run_id LIMIT 1) WHERE status IN ('running', "
                    "'killed') AND EXISTS (SELECT 1 FROM src.runs s WHERE s.started_at = "
                    "runs.started_at AND s.config_json = runs.config_json AND {0} NOT IN "
                    "('running', runs.status))",
                    status),
        "DROP TABLE IF EXISTS temp.run_map",
        "CREATE TEMP TABLE run_map AS SELECT s.run_id AS old_id, min(m.run_id) AS new_id "
        "FROM src.runs s JOIN main.runs m ON m.started_at = s.started_at AND "
        "m.config_json = s.config_json GROUP BY s.run_id",
        fmt::format("INSERT OR IGNORE INTO main.servers ({0}) SELECT {0} FROM src.servers",
                    joined(shared_columns(h, "servers", {}), "")),
        fmt::format("INSERT OR IGNORE INTO main.questions ({0}) SELECT {0} FROM src.questions",
                    joined(shared_columns(h, "questions", {}), "")),
    };
    for (const auto& sql : steps) {
        if (auto r = exec(sql); !r) {
            return r;
        }
    }
    return {};
}

// Users' scorers main does not hold yet. Every response main already scored
// lacks their scores, so its classifications are dropped: the scoring stage
// then scores every response again, under every scorer (scores are replaced,
// so their text mode is kept).
util::Result<void> merge_scorers(Database& db) {
    sqlite3* h = db.handle();
    if (count(h, "SELECT count(*) FROM src.scorers WHERE name NOT IN "
                 "(SELECT name FROM main.scorers)") == 0) {
        return {};
    }
    if (auto r = db.exec("DELETE FROM main.classifications"); !r) {
        return r;
    }
    return db.exec(fmt::format("INSERT OR IGNORE INTO main.scorers ({0}) SELECT {0} FROM "
                               "src.scorers",
                               joined(shared_columns(h, "scorers", {}), "")));
}

// The requests of `t` with their bodies: a request already in main (same
// key) is kept. Bodies are content-addressed: one row per distinct
// body_sha256 in either file, and each copied request points at the merged
// row. A body stored after a shared prefix (schema v12) points at main's row
// of that prefix, found by its hash. Returns how many requests were added.
util::Result<int64_t> copy_requests(Database& db, const Tables& t) {
    sqlite3* h = db.handle();
    const auto table = t.requests;
    if (auto r = db.exec(fmt::format(
            "INSERT OR IGNORE INTO main.body_prefixes (prefix_sha256, text) SELECT "
            "prefix_sha256, text FROM src.body_prefixes WHERE prefix_id IN (SELECT b.prefix_id "
            "FROM src.request_bodies b JOIN src.{} q ON q.body_id = b.body_id) ORDER BY prefix_id",
            table));
        !r) {
        return r.error();
    }
    if (auto r = db.exec(fmt::format(
            "INSERT OR IGNORE INTO main.request_bodies (body_sha256, request_json, prefix_id) "
            "SELECT sb.body_sha256, sb.request_json, (SELECT mp.prefix_id FROM main.body_prefixes "
            "mp JOIN src.body_prefixes sp ON sp.prefix_sha256 = mp.prefix_sha256 WHERE "
            "sp.prefix_id = sb.prefix_id) FROM src.request_bodies sb WHERE sb.body_id IN (SELECT "
            "body_id FROM src.{}) ORDER BY sb.body_id",
            table));
        !r) {
        return r.error();
    }
    auto cols = shared_columns(h, std::string(table),
                               {std::string(t.request_id), "response_id", "body_id"});
    if (auto r = db.exec(fmt::format(
            "INSERT INTO main.{0} ({1}, body_id) SELECT {2}, (SELECT b.body_id FROM "
            "main.request_bodies b JOIN src.request_bodies sb ON sb.body_sha256 = b.body_sha256 "
            "WHERE sb.body_id = s.body_id) FROM src.{0} s WHERE NOT EXISTS (SELECT 1 FROM "
            "main.{0} m WHERE {4}) ORDER BY s.{3}",
            table, joined(cols, ""), joined(cols, "s."), t.request_id, same_request(t, "m", "s")));
        !r) {
        return r.error();
    }
    return changes(h);
}

// Request bodies and requests.
util::Result<void> merge_requests(Database& db, MergeSummary& summary) {
    auto added = copy_requests(db, k_measured);
    if (!added) {
        return added.error();
    }
    summary.requests_added += *added;
    summary.requests_known += count(db.handle(), "SELECT count(*) FROM src.requests") - *added;
    return {};
}

// The responses of `t` not in main yet (same request, start time and body),
// then each request's response that counts, as a run picks it: the newest
// success, else the newest failure. Returns how many responses were added.
util::Result<int64_t> copy_responses(Database& db, const Tables& t) {
    sqlite3* h = db.handle();
    auto cols = shared_columns(h, std::string(t.responses),
                               {"response_id", std::string(t.request_id), "run_id"});
    if (auto r = db.exec(fmt::format(
            "INSERT INTO main.{0} ({1}, run_id, {2}) SELECT m.{1}, rm.new_id, {3} FROM src.{0} r "
            "JOIN src.{4} sq ON sq.{1} = r.{1} JOIN main.{4} m ON {5} "
            "LEFT JOIN temp.run_map rm ON rm.old_id = r.run_id WHERE NOT EXISTS (SELECT 1 FROM "
            "main.{0} x WHERE x.{1} = m.{1} AND x.started_at = r.started_at AND x.response_json "
            "= r.response_json) ORDER BY r.response_id",
            t.responses, t.request_id, joined(cols, ""), joined(cols, "r."), t.requests,
            same_request(t, "m", "sq")));
        !r) {
        return r.error();
    }
    const int64_t added = changes(h);
    if (auto r = db.exec(fmt::format(
            "UPDATE main.{0} SET response_id = (SELECT x.response_id FROM main.{1} x WHERE x.{2} "
            "= {0}.{2} ORDER BY x.ok DESC, x.started_at DESC, x.response_id DESC LIMIT 1) WHERE "
            "EXISTS (SELECT 1 FROM src.{0} s WHERE {3})",
            t.requests, t.responses, t.request_id, same_request(t, "s", t.requests)));
        !r) {
        return r.error();
    }
    return added;
}

// Responses, and each request's response that counts.
util::Result<void> merge_responses(Database& db, MergeSummary& summary) {
    auto added = copy_responses(db, k_measured);
    if (!added) {
        return added.error();
    }
    summary.responses_added += *added;
    summary.responses_known += count(db.handle(), "SELECT count(*) FROM src.responses") - *added;
    return {};
}

// The decision-point probe's requests and responses, copied as the measured
// ones are: shards of a run with --probe merge into what one unsharded run
// stores. A file from before the probe (schema v8) has none.
util::Result<void> merge_probes(Database& db, MergeSummary& summary) {
    if (count(db.handle(), "SELECT count(*) FROM src.sqlite_master WHERE name = "
                           "'probe_requests'") == 0) {
        return {};
    }
    if (auto r = copy_requests(db, k_probe); !r) {
        return r.error();
    }
    auto added = copy_responses(db, k_probe);
    if (!added) {
        return added.error();
    }
    summary.probe_responses_added += *added;
    return {};
}

// Merge the attached `src` into main inside one transaction.
util::Result<void> merge_one(Database& db, const std::string& in, InputWriter writer,
                             MergeSummary& summary) {
    sqlite3* h = db.handle();
    if (auto r = db.exec("BEGIN IMMEDIATE"); !r) {
        return r;
    }
    auto fail = [&](util::Error e) -> util::Result<void> {
        (void)db.exec("ROLLBACK");
        return e;
    };
    if (auto conflict = find_conflict(h); !conflict.empty()) {
        return fail(make_error(
            ErrorKind::data,
            fmt::format("merge: {} conflicts with what is merged before it: {}", in, conflict)));
    }
    if (auto r = merge_runs(db, writer); !r) {
        return fail(r.error());
    }
    if (auto r = merge_scorers(db); !r) {
        return fail(r.error());
    }
    if (auto r = merge_requests(db, summary); !r) {
        return fail(r.error());
    }
    if (auto r = merge_responses(db, summary); !r) {
        return fail(r.error());
    }
    if (auto r = merge_probes(db, summary); !r) {
        return fail(r.error());
    }
    if (auto r = db.exec("DROP TABLE temp.run_map"); !r) {
        return fail(r.error());
    }
    if (auto r = db.exec("COMMIT"); !r) {
        return fail(r.error());
    }
    return {};
}

// Flush `path`'s data to disk, so a crash after the rename cannot leave a
// torn file under the output's name.
bool sync_file(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        return false;
    }
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

// A text a database is scored on, and the first file that said it.
struct ScoredText {
    std::string file, text;
};

// Adds the text `file` (open as `s`) is scored on (rescore --score-text) to
// `scored`, which keeps the first file that says one: one output of two
// files scored on different texts would compare accuracies of neither, so
// that is a usage error naming both, starting with `who` ("merge: ") and
// ending with the command to run after rescoring (`then`).
util::Result<void> add_score_text(Store& s, const std::string& file,
                                  std::optional<ScoredText>& scored, std::string_view who,
                                  std::string_view then) {
    auto text = stored_score_text(s);
    if (!text) {
        return text.error();
    }
    if (!*text) {
        return {};
    }
    if (!scored) {
        scored = ScoredText{file, **text};
        return {};
    }
    if (**text != scored->text) {
        return make_error(ErrorKind::usage,
                          fmt::format("{}{} is scored on the {} text and {} on the {} text "
                                      "(rescore --score-text): accuracies of two texts compare "
                                      "nothing; rescore one like the other, then {}",
                                      who, scored->file, scored->text, file, **text, then));
    }
    return {};
}

} // namespace

// Every input must exist and be a diffeval database this build can read.
// Each input is a diffeval database this build can read, and all that were
// scored (OUT too, when it exists) on the same text; that text.
util::Result<std::optional<std::string>> check_inputs(const std::string& out,
                                                      const std::vector<std::string>& inputs,
                                                      const InputCheck& check) {
    if (inputs.empty()) {
        return make_error(ErrorKind::usage, "merge: give the databases to merge after OUT");
    }
    std::optional<ScoredText> scored;
    std::error_code out_ec;
    auto files = inputs;
    if (fs::exists(out, out_ec)) {
        files.insert(files.begin(), out);
    }
    for (const auto& in : files) {
        std::error_code ec;
        if (!fs::exists(in, ec)) {
            return make_error(ErrorKind::usage,
                              ec ? fmt::format("merge: cannot read {}: {}", in, ec.message())
                                 : fmt::format("merge: {} does not exist; give the path of a "
                                               "database 'diffeval run' wrote",
                                               in));
        }
        auto s = Store::open(in, Store::Mode::read_only);
        if (!s) {
            return s.error();
        }
        if (check) {
            if (auto r = check(**s); !r) {
                return r.error();
            }
        }
        // A merged file is scored on one text: a fresh OUT was scored on
        // the full text whatever its inputs had been rescored on.
        if (auto r = add_score_text(**s, in, scored, "merge: ", "merge"); !r) {
            return r.error();
        }
    }
    return scored ? std::optional<std::string>(scored->text) : std::nullopt;
}

// `tmp` as a copy of `out` (when it exists), made with VACUUM INTO.
util::Result<void> copy_output(const std::string& out, const fs::path& tmp) {
    std::error_code ec; // an OUT that cannot be seen is one the lock could not be taken for
    if (fs::exists(out, ec)) {
        auto existing = Store::open(out, Store::Mode::read_only);
        if (!existing) {
            return existing.error();
        }
        char* err = nullptr;
        auto sql = fmt::format("VACUUM INTO {}", sql_quote(tmp.string()));
        if (sqlite3_exec((*existing)->handle(), sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
            // The connection's error names a full disk as every store error does.
            std::string msg = error_message((*existing)->handle());
            sqlite3_free(err);
            remove_with_sidecars(tmp);
            return make_error(ErrorKind::io, fmt::format("merge: cannot copy {}: {}", out, msg));
        }
    }
    return {};
}

// Each input into `tmp`, in its own transaction; the caller throws `tmp`
// away on any error, so `out` is untouched.
util::Result<void> merge_inputs(const fs::path& tmp, const std::vector<std::string>& inputs,
                                MergeSummary& summary) {
    Database db;
    if (auto r = db.open(tmp.string(), Database::Create::no); !r) {
        return r.error();
    }
    // The temporary file is thrown away unless the merge completes, so
    // it needs no sync per transaction: one sync before the rename.
    // A rollback journal writes each page once; WAL would write it twice
    // (log, then checkpoint). The file is switched back to WAL, as every
    // diffeval database is, before it takes OUT's place.
    if (auto r = db.exec("PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF"); !r) {
        return r.error();
    }
    // Requests with more than one successful answer: another run of the
    // same configuration answered them again, and the newest counts.
    constexpr const char* k_answered_twice =
        "SELECT count(*) FROM (SELECT request_id FROM main.responses WHERE ok = 1 "
        "GROUP BY request_id HAVING count(*) > 1)";
    const int64_t twice_before = count(db.handle(), k_answered_twice);
    for (const auto& in : inputs) {
        if (auto r = db.attach_read_only(in, "src"); !r) {
            return make_error(ErrorKind::io,
                              fmt::format("merge: cannot read {}: {}", in, r.error().message));
        }
        // Whether a process still writes the input, asked before it is
        // read: a run that ends meanwhile has stored its status by then.
        const auto writer = RunLock::holder(in) ? InputWriter::running : InputWriter::none;
        auto r = merge_one(db, in, writer, summary);
        (void)db.exec("DETACH src");
        if (!r) {
            return r.error();
        }
    }
    summary.answered_again = count(db.handle(), k_answered_twice) - twice_before;
    if (auto r = db.exec("PRAGMA journal_mode=WAL"); !r) {
        return r.error();
    }
    return {};
}

util::Result<MergeSummary> merge(const std::string& out_arg, const std::vector<std::string>& inputs,
                                 const InputCheck& check) {
    // The file OUT names: a symbolic link stays a link to the merged file.
    const std::string out = util::resolved_path(out_arg);
    // 1. Every input must be a diffeval database this build can read.
    auto score_text = check_inputs(out, inputs, check);
    if (!score_text) {
        return score_text.error();
    }
    // 2. Start from a copy of `out` (or an empty store) in a temporary file,
    // which is removed first: an input of that name would be lost.
    const fs::path tmp = out + std::string(k_merge_tmp_suffix);
    for (const auto& in : inputs) {
        std::error_code ec;
        if (util::resolved_path(in) == tmp.string() || fs::equivalent(in, tmp, ec)) {
            return make_error(ErrorKind::usage,
                              fmt::format("merge: {} is the file this merge builds {} in, which "
                                          "it removes first; rename it (a stopped merge may have "
                                          "left it) and merge it under its new name",
                                          in, out_arg));
        }
    }
    remove_with_sidecars(tmp);
    // A step that failed: the temporary file goes, and a full disk is said
    // with what became of OUT.
    std::error_code out_ec;
    const bool out_existed = fs::exists(out, out_ec);
    const auto failed = [&](util::Error e) -> util::Error {
        remove_with_sidecars(tmp);
        if (is_disk_full(e)) {
            return make_error(ErrorKind::io,
                              fmt::format("merge: cannot write {} while building the merge: {}; "
                                          "{} {}",
                                          tmp.string(), k_disk_full, out,
                                          out_existed ? "was left as it was" : "was not created"));
        }
        return e;
    };
    if (auto r = copy_output(out, tmp); !r) {
        return failed(r.error());
    }
    MergeSummary summary;
    summary.score_text = *score_text;
    if (auto store = Store::open(tmp.string(), Store::Mode::read_write); !store) {
        return failed(store.error()); // creates the schema, or migrates OUT's copy
    }
    // 3. Each input in its own transaction.
    if (auto r = merge_inputs(tmp, inputs, summary); !r) {
        return failed(r.error());
    }
    if (!sync_file(tmp)) {
        remove_with_sidecars(tmp);
        return make_error(ErrorKind::io,
                          fmt::format("merge: cannot sync {} to disk", tmp.string()));
    }
    // 4. Replace `out` in one step, with its permissions: a private
    // database stays private.
    std::error_code ec;
    if (auto status = fs::status(out, ec); !ec && fs::exists(status)) {
        fs::permissions(tmp, status.permissions(), ec);
    }
    ec.clear();
    fs::rename(tmp, out, ec);
    if (ec) {
        remove_with_sidecars(tmp);
        return make_error(ErrorKind::io, fmt::format("merge: cannot move the result to {}: {}", out,
                                                     ec.message()));
    }
    return summary;
}

util::Result<std::optional<std::string>> combine_with_baseline(const std::string& out,
                                                               const std::string& db,
                                                               const std::string& baseline_db,
                                                               const std::string& prefix) {
    // Both scored on one text, as merge asks of its inputs: the combined
    // copy was scored on the full text whatever both had been rescored on
    // (an interop audit: the gate's numbers were in neither database).
    std::optional<ScoredText> scored;
    for (const auto& in : {baseline_db, db}) {
        auto s = Store::open(in, Store::Mode::read_only);
        if (!s) {
            return s.error();
        }
        if (auto r = add_score_text(**s, in, scored, "--baseline-db ", "gate"); !r) {
            return r.error();
        }
    }
    remove_with_sidecars(out);
    if (auto r = merge(out, {baseline_db}); !r) {
        return r.error();
    }
    {
        // Rename the baseline's servers, and its request keys with them, so
        // identical requests of the two runs stay two groups.
        Database h;
        if (auto r = h.open(out, Database::Create::no); !r) {
            return r.error();
        }
        const auto p = sql_quote(prefix);
        if (auto r = h.exec(fmt::format(
                "BEGIN IMMEDIATE; UPDATE servers SET name = {0} || name; "
                "UPDATE requests SET server = {0} || server, request_key = {0} || request_key; "
                "UPDATE probe_requests SET server = {0} || server, request_key = {0} || "
                "request_key; "
                // What the runs asked (store::completeness) names the servers too.
                "UPDATE runs SET config_json = json_set(config_json, '$.servers', (SELECT "
                "json_group_array(json_set(s.value, '$.name', {0} || json_extract(s.value, "
                "'$.name'))) FROM json_each(runs.config_json, '$.servers') s)) WHERE "
                "json_valid(config_json) AND json_type(config_json, '$.servers') = 'array'; "
                "COMMIT",
                p));
            !r) {
            return r.error();
        }
    }
    if (auto r = merge(out, {db}); !r) {
        // What is wrong with `db` itself (no diffeval database, a newer
        // one) names it, and is not the baseline's.
        if (r.error().message.starts_with(db)) {
            return r.error();
        }
        return make_error(r.error().kind,
                          fmt::format("--baseline-db {}: {}", baseline_db, r.error().message));
    }
    return scored ? std::optional<std::string>(scored->text) : std::nullopt;
}

} // namespace diffeval::store
