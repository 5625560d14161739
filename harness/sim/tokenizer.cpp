// The token rules of tokenizer.hpp, written as one scanning function so that
// counting and splitting cannot disagree.
#include <harness/sim/tokenizer.hpp>

#include <array>

namespace diffeval::sim {

namespace {

constexpr std::array<std::string_view, 5> k_special = {"<think>", "</think>", "<|im_start|>",
                                                       "<|im_end|>", "<|endoftext|>"};
constexpr size_t k_max_letters = 8;

constexpr size_t k_max_punctuation = 4;
constexpr size_t k_max_digits = 3;

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool is_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// Printable ASCII that is neither a letter, a digit nor a space.
bool is_punctuation(char c) {
    return c > ' ' && c < 0x7F && !is_letter(c) && !is_digit(c);
}

bool starts_special(std::string_view text, size_t pos) {
    for (auto special : k_special) {
        if (text.compare(pos, special.size(), special) == 0) {
            return true;
        }
    }
    return false;
}

size_t utf8_length(std::string_view text, size_t pos) {
    auto c = static_cast<unsigned char>(text[pos]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (pos + n > text.size()) {
        return 1;
    }
    for (size_t k = 1; k < n; ++k) {
        if ((static_cast<unsigned char>(text[pos + k]) & 0xC0) != 0x80) {
            return 1;
        }
    }
    return n;
}

} // namespace

size_t token_length(std::string_view text, size_t pos) {
    char c = text[pos];
    if (c == '<') {
        for (auto special : k_special) {
            if (text.compare(pos, special.size(), special) == 0) {
                return special.size();
            }
        }
    }
    if (c == '\n') {
        return 1;
    }
    size_t start = pos;
    if (c == ' ' && pos + 1 < text.size() && is_letter(text[pos + 1])) {
        ++pos;
    }
    if (is_letter(text[pos])) {
        size_t end = pos;
        while (end < text.size() && end - pos < k_max_letters && is_letter(text[end])) {
            ++end;
        }
        return end - start;
    }
    if (c == ' ' && pos + 1 < text.size() && is_punctuation(text[pos + 1]) &&
        !starts_special(text, pos + 1)) {
        ++pos;
    }
    if (is_digit(text[pos]) && pos == start) {
        size_t end = pos;
        while (end < text.size() && end - pos < k_max_digits && is_digit(text[end])) {
            ++end;
        }
        return end - start;
    }
    if (is_punctuation(text[pos])) {
        size_t end = pos;
        while (end < text.size() && end - pos < k_max_punctuation && is_punctuation(text[end]) &&
               !(end > pos && text[end] == '<' && starts_special(text, end))) {
            ++end;
        }
        return end - start;
    }
    return utf8_length(text, start);
}

std::vector<std::string_view> tokenize(std::string_view text) {
    std::vector<std::string_view> out;
    out.reserve(text.size() / 3 + 1);
    for (size_t pos = 0; pos < text.size();) {
        size_t n = token_length(text, pos);
        out.push_back(text.substr(pos, n));
        pos += n;
    }
    return out;
}

int count_tokens(std::string_view text) {
    int n = 0;
    for (size_t pos = 0; pos < text.size(); pos += token_length(text, pos)) {
        ++n;
    }
    return n;
}

int PrefixTokenCounter::count(std::string_view text) {
    auto [pos, tokens] = m_recent.resume(text, 0);
    while (pos < text.size()) {
        pos += token_length(text, pos);
        ++tokens;
        if (text[pos - 1] == '\n') {
            m_recent.checkpoint(pos, tokens);
        }
    }
    m_recent.finish(text);
    return tokens;
}

bool is_special_token(std::string_view token) {
    for (auto special : k_special) {
        if (token == special) {
            return true;
        }
    }
    return false;
}

} // namespace diffeval::sim
