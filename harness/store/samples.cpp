// Typed reads and writes for lm-eval samples files; see samples.hpp.
#include <harness/store/samples.hpp>

#include <harness/store/sqlite.hpp>
#include <harness/store/view_sql.hpp>

#include <fmt/format.h>

namespace diffeval::store {

using util::ErrorKind;
using util::make_error;

util::Result<std::vector<AnsweredGroup>> answered_groups(Store& st) {
    Statement s(st.handle(), "SELECT DISTINCT server, framing, max_tokens, repeat FROM requests "
                             "WHERE response_id IS NOT NULL ORDER BY 1, 2, 3, 4");
    std::vector<AnsweredGroup> out;
    while (s.step()) {
        out.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                       static_cast<int>(s.column_int(3))});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", s.error()));
    }
    return out;
}

util::Result<void> for_each_answered_request(Store& st, const AnsweredGroup& group,
                                             const std::vector<std::string>& scorers,
                                             const AnsweredRequestVisitor& visit) {
    Statement rows(
        st.handle(),
        fmt::format(
            "SELECT q.question_idx, b.request_json, coalesce(r.text, ''), "
            "coalesce(qu.question, ''), coalesce(qu.answer, ''), r.response_id, r.ok, "
            "coalesce(r.error_kind, ''), coalesce(r.error, ''), b.body_id IS NULL "
            "FROM requests q JOIN responses r ON r.response_id = q.response_id "
            "LEFT JOIN ({}) b ON b.body_id = q.body_id "
            "LEFT JOIN questions qu ON qu.dataset = q.dataset AND qu.question_idx = q.question_idx "
            "WHERE q.server = ? AND q.framing = ? AND q.max_tokens = ? AND q.repeat = ? "
            "ORDER BY q.question_idx",
            k_request_bodies_select));
    Statement score(st.handle(), "SELECT extracted, correct FROM scores WHERE response_id = ? AND "
                                 "scorer = ? ORDER BY score_text = 'full' DESC LIMIT 1");
    AnsweredRequest r;
    rows.bind(group.server, group.framing, group.max_tokens, group.repeat);
    while (rows.step()) {
        // A request whose body the file does not hold was left out of the
        // export without a word (a hostile-file audit).
        if (rows.column_int(9) == 1) {
            return make_error(ErrorKind::data,
                              fmt::format("{}: question {} (repeat {}) of {}/{}/{} has no stored "
                                          "request body (requests.body_id names none in "
                                          "request_bodies): the file was edited or is damaged; "
                                          "use a copy from before",
                                          st.path(), rows.column_int(0), group.repeat, group.server,
                                          group.framing, group.max_tokens));
        }
        r.question_idx = rows.column_int(0);
        r.request_json = rows.column_view(1);
        r.text = rows.column_view(2);
        r.question = rows.column_view(3);
        r.answer = rows.column_view(4);
        r.response_id = rows.column_int(5);
        r.ok = rows.column_int(6) == 1;
        r.error_kind = rows.column_view(7);
        r.error = rows.column_view(8);
        r.verdicts.clear();
        for (const auto& scorer : scorers) {
            score.bind(r.response_id, scorer);
            if (score.step()) {
                r.verdicts.push_back(StoredVerdict{score.column_text(0), score.column_int(1) != 0});
            } else if (score.error().empty()) {
                r.verdicts.push_back(std::nullopt);
            } else {
                return make_error(ErrorKind::io,
                                  fmt::format("cannot read scores: {}", score.error()));
            }
        }
        if (auto v = visit(r); !v) {
            return v;
        }
    }
    if (!rows.error().empty()) {
        return make_error(ErrorKind::io, fmt::format("cannot read responses: {}", rows.error()));
    }
    return {};
}

util::Result<std::optional<std::string>> server_url(Store& st, const std::string& name) {
    Statement s(st.handle(), "SELECT url FROM servers WHERE name = ?");
    s.bind(name);
    if (s.step()) {
        return std::optional<std::string>{s.column_text(0)};
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot read the servers table: {}", s.error()));
    }
    return std::optional<std::string>{};
}

util::Result<std::vector<std::optional<std::string>>>
answered_texts(Store& st, const std::vector<RequestRow>& requests) {
    Statement s(st.handle(),
                "SELECT r.text FROM requests q INDEXED BY requests_group JOIN responses r ON "
                "r.response_id = q.response_id WHERE q.server = ? AND q.framing = ? AND "
                "q.max_tokens = ? AND q.repeat = ? AND q.question_idx = ? AND q.request_key = ? "
                "AND r.ok = 1");
    std::vector<std::optional<std::string>> out;
    out.reserve(requests.size());
    for (const auto& q : requests) {
        s.bind(q.server, q.framing, q.max_tokens, q.repeat, q.question_idx, q.key);
        if (s.step()) {
            out.emplace_back(s.column_text(0));
        } else if (s.error().empty()) {
            out.emplace_back();
        } else {
            return make_error(ErrorKind::io,
                              fmt::format("cannot read stored responses: {}", s.error()));
        }
        s.reset();
    }
    return out;
}

util::Result<CountedFailures> counted_failures(Store& st, const std::string& server,
                                               const std::string& framing) {
    Statement s(st.handle(),
                "SELECT q.request_key, coalesce(r.error_kind, ''), coalesce(r.error, '') "
                "FROM requests q JOIN responses r ON r.response_id = q.response_id "
                "WHERE q.server = ? AND q.framing = ? AND r.ok = 0");
    CountedFailures out;
    s.bind(server, framing);
    while (s.step()) {
        out.emplace(s.column_text(0), std::pair{s.column_text(1), s.column_text(2)});
    }
    if (!s.error().empty()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot read stored responses: {}", s.error()));
    }
    return out;
}

util::Result<std::optional<size_t>> first_taken_place(Store& st,
                                                      const std::vector<RequestRow>& rows) {
    Statement s(st.handle(), "SELECT 1 FROM requests WHERE server = ? AND framing = ? AND "
                             "max_tokens = ? AND repeat = ? AND question_idx = ? AND "
                             "request_key <> ? LIMIT 1");
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        s.bind(r.server, r.framing, r.max_tokens, r.repeat, r.question_idx, r.key);
        if (s.step()) {
            return std::optional<size_t>(i);
        }
        if (!s.error().empty()) {
            return make_error(ErrorKind::io, fmt::format("cannot read requests: {}", s.error()));
        }
        s.reset();
    }
    return std::optional<size_t>();
}

util::Result<std::vector<std::optional<std::string>>>
stored_questions(Store& st, const std::string& dataset, const std::vector<int64_t>& question_idxs) {
    Statement s(st.handle(),
                "SELECT question FROM questions WHERE dataset = ? AND question_idx = ?");
    std::vector<std::optional<std::string>> out;
    out.reserve(question_idxs.size());
    for (const auto idx : question_idxs) {
        s.bind(dataset, idx);
        if (s.step()) {
            out.emplace_back(s.column_text(0));
        } else if (s.error().empty()) {
            out.emplace_back();
        } else {
            return make_error(ErrorKind::io, fmt::format("cannot read questions: {}", s.error()));
        }
    }
    return out;
}

util::Result<void> put_questions_at(Store& st, const std::string& dataset,
                                    const std::vector<IndexedQuestion>& questions) {
    Statement s(st.handle(),
                "INSERT INTO questions (dataset, question_idx, question, answer, question_sha256) "
                "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (dataset, question_idx) DO UPDATE SET "
                "question_sha256 = excluded.question_sha256 WHERE question_sha256 IS NULL AND "
                "question = excluded.question AND answer = excluded.answer");
    for (const auto& q : questions) {
        if (!s.bind(dataset, q.question_idx, q.question, q.answer,
                    question_hash(q.question, q.answer))
                 .run()) {
            return make_error(ErrorKind::io, fmt::format("cannot store questions: {}", s.error()));
        }
    }
    // Requests an older import stored before their question had a hash.
    Statement requests(st.handle(),
                       "UPDATE requests SET question_sha256 = (SELECT q.question_sha256 FROM "
                       "questions q WHERE q.dataset = requests.dataset AND q.question_idx = "
                       "requests.question_idx) WHERE question_sha256 IS NULL AND dataset = ?");
    if (!requests.bind(dataset).run()) {
        return make_error(ErrorKind::io,
                          fmt::format("cannot store questions' hashes: {}", requests.error()));
    }
    return {};
}

} // namespace diffeval::store
