// Whole-file reads: every byte of a regular file whatever its size against
// the read's blocks, a file whose reported size is not what it holds, and a
// missing file. Reads of a file's ends: whole lines, what was left out said,
// a pipe like a file.
#include <harness/util/file.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace diffeval;

namespace {

std::filesystem::path temp_file(const std::string& name, const std::string& bytes) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("diffeval-unit-file-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

} // namespace

TEST(ReadFile, ReturnsEveryByteWhateverTheSizeAgainstItsBlocks) {
    // Around the 1 MiB block and the reserved size: one short, exact, one over.
    for (const size_t size : {size_t{0}, size_t{1}, (size_t{1} << 20) - 1, size_t{1} << 20,
                              (size_t{1} << 20) + 1, size_t{3} * (1 << 20) + 12345}) {
        std::string bytes(size, '\0');
        for (size_t i = 0; i < size; ++i) {
            bytes[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
        }
        const auto path = temp_file(std::to_string(size), bytes);
        const auto read = util::read_file(path);
        std::filesystem::remove(path);
        ASSERT_TRUE(read.has_value()) << size;
        EXPECT_EQ(read->size(), size);
        EXPECT_TRUE(*read == bytes) << size;
    }
}

TEST(ReadFile, ReadsToTheEndWhenTheReportedSizeIsWrong) {
    // /proc files report a size of 0 and hold more.
    const auto read = util::read_file("/proc/self/status");
    ASSERT_TRUE(read.has_value());
    EXPECT_NE(read->find("Name:"), std::string::npos);
}

TEST(ReadFile, AMissingFileIsNoText) {
    EXPECT_FALSE(util::read_file("/nonexistent/diffeval-unit-file").has_value());
}

// A file a user names is read whole only up to its kind's bound: /dev/zero
// (or a mistyped multi-gigabyte path) took all memory until the kernel
// killed the process. Each failure is the path and why.
TEST(ReadInput, AFileOverItsBoundOrUnreadableIsOneReason) {
    const auto path = temp_file("bounded", std::string(3000, 'x'));
    auto whole = util::read_input(path, 3000);
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    EXPECT_EQ(whole->size(), 3000U);
    auto over = util::read_input(path, 2999);
    std::filesystem::remove(path);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.error().kind, util::ErrorKind::usage);
    EXPECT_NE(over.error().message.find(path.string() + ": it holds more than"), std::string::npos)
        << over.error().message;
    // A stream whose size says nothing is cut off at the bound too.
    auto zero = util::read_input("/dev/zero", size_t{4} << 20);
    ASSERT_FALSE(zero.ok());
    EXPECT_EQ(zero.error().message,
              "/dev/zero: it holds more than 4 MiB, more than any file of this kind diffeval "
              "reads");
    auto missing = util::read_input("/nonexistent/diffeval-unit-file", 100);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message,
              "/nonexistent/diffeval-unit-file: No such file or directory");
    auto dir = util::read_input("/tmp", 100);
    ASSERT_FALSE(dir.ok());
    EXPECT_EQ(dir.error().message, "/tmp: it is a directory");
}

namespace {

// Numbered lines of uneven length, `bytes` or a little more in all.
std::string numbered_lines(size_t bytes) {
    std::string text;
    for (size_t i = 0; text.size() < bytes; ++i) {
        text += "line " + std::to_string(i) + std::string(i % 37, 'x') + "\n";
    }
    return text;
}

// `text` split after each line break.
std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        auto end = text.find('\n', start);
        end = end == std::string::npos ? text.size() : end + 1;
        lines.push_back(text.substr(start, end - start));
        start = end;
    }
    return lines;
}

} // namespace

TEST(ReadFileEnds, AFileWithinWhatIsKeptIsReadWhole) {
    const auto text = numbered_lines(5000);
    const auto path = temp_file("ends-whole", text);
    const auto ends = util::read_file_ends(path, 4000, text.size() - 4000);
    std::filesystem::remove(path);
    ASSERT_TRUE(ends.ok());
    EXPECT_EQ(ends->left_out, 0u);
    EXPECT_TRUE(ends->text == text);
}

TEST(ReadFileEnds, ALongFileKeepsWholeLinesOfItsStartAndEndAndSaysWhatWasLeftOut) {
    // Longer than the 1 MiB read block, so the end is reached by a seek.
    const auto text = numbered_lines(size_t{3} << 20);
    const auto path = temp_file("ends-long", text);
    const auto ends = util::read_file_ends(path, 1000, 500);
    std::filesystem::remove(path);
    ASSERT_TRUE(ends.ok());
    const auto kept = lines_of(ends->text);
    const auto all = lines_of(text);
    // The kept lines: the file's first lines, one line naming what was left
    // out, the file's last lines; nothing else and no piece of a line.
    size_t marker = 0;
    while (marker < kept.size() && kept[marker] == all[marker]) {
        ++marker;
    }
    ASSERT_LT(marker, kept.size());
    EXPECT_GT(marker, 10u);
    EXPECT_EQ(kept[marker], fmt::format("[diffeval: {} bytes of this file left out here: {}]\n",
                                        ends->left_out, path.string()));
    const size_t tail_lines = kept.size() - marker - 1;
    EXPECT_GT(tail_lines, 5u);
    for (size_t i = 0; i < tail_lines; ++i) {
        EXPECT_EQ(kept[marker + 1 + i], all[all.size() - tail_lines + i]);
    }
    // Everything is either kept or counted as left out.
    EXPECT_EQ(ends->text.size() - kept[marker].size() + ends->left_out, text.size());
    EXPECT_LE(ends->text.size() - kept[marker].size(), 1500u);
}

// Read from a byte on (the part of a log this launch appended): the same
// ends of that part, with what was before it neither kept nor counted.
TEST(ReadFileEnds, FromAByteOnKeepsTheEndsOfWhatFollowsIt) {
    const auto earlier = std::string(5000, 'e') + "\n";
    const auto later = numbered_lines(size_t{3} << 20);
    const auto path = temp_file("ends-from", earlier + later);
    const auto alone = temp_file("ends-from-alone", later);
    const auto from = util::read_file_ends(path, 1000, 500, earlier.size());
    const auto expected = util::read_file_ends(alone, 1000, 500);
    const auto whole = earlier + later;
    const auto short_part = util::read_file_ends(path, 1000, 500, whole.size() - 1200);
    const auto past_end = util::read_file_ends(path, 1000, 500, whole.size());
    std::filesystem::remove(path);
    std::filesystem::remove(alone);
    ASSERT_TRUE(from && expected && short_part && past_end);
    EXPECT_EQ(from->left_out, expected->left_out);
    EXPECT_EQ(from->text.rfind(later.substr(0, 100), 0), 0U);
    EXPECT_EQ(from->text.substr(0, 200), expected->text.substr(0, 200));
    EXPECT_EQ(from->text.substr(from->text.size() - 200),
              expected->text.substr(expected->text.size() - 200));
    EXPECT_EQ(short_part->text, whole.substr(whole.size() - 1200)); // within what is kept
    EXPECT_EQ(past_end->text, "");
    EXPECT_EQ(past_end->left_out, 0U);
}

TEST(ReadFileEnds, APipeKeepsWhatTheSameFileKeeps) {
    // A pipe cannot seek: it is read through, and keeps the same lines.
    const auto text = numbered_lines((size_t{5} << 20) / 2);
    const auto path = temp_file("ends-file", text);
    const auto from_file = util::read_file_ends(path, 3000, 2000);
    std::filesystem::remove(path);
    const auto fifo = std::filesystem::temp_directory_path() /
                      ("diffeval-unit-file-" + std::to_string(::getpid()) + "-fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // The writer is there before the read opens the FIFO (a FIFO no process
    // writes to reads as empty): a reader held meanwhile lets it open.
    const int holder = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(holder, 0);
    const int out = ::open(fifo.c_str(), O_WRONLY);
    ASSERT_GE(out, 0);
    std::thread writer([&] {
        for (size_t at = 0; at < text.size();) {
            const auto n = ::write(out, text.data() + at, text.size() - at);
            if (n <= 0) {
                break;
            }
            at += static_cast<size_t>(n);
        }
        ::close(out);
    });
    const auto from_pipe = util::read_file_ends(fifo, 3000, 2000);
    writer.join();
    ::close(holder);
    std::filesystem::remove(fifo);
    ASSERT_TRUE(from_file.ok());
    ASSERT_TRUE(from_pipe.ok()) << from_pipe.error().message;
    EXPECT_EQ(from_pipe->left_out, from_file->left_out);
    auto unnamed = [](std::string s, const std::filesystem::path& p) {
        const auto at = s.find(p.string());
        return at == std::string::npos ? s : s.erase(at, p.string().size());
    };
    EXPECT_TRUE(unnamed(from_pipe->text, fifo) == unnamed(from_file->text, path));
}

// A FIFO no process writes to held open(2) forever (and the run with it,
// deaf to SIGINT): now it reads as empty, at once.
TEST(ReadFileEnds, AFifoNoProcessWritesToReadsAsEmpty) {
    const auto fifo = std::filesystem::temp_directory_path() /
                      ("diffeval-unit-file-" + std::to_string(::getpid()) + "-lone-fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto ends = util::read_file_ends(fifo, 3000, 2000);
    const auto whole = util::read_input(fifo, 100);
    const auto plain = util::read_file(fifo);
    std::filesystem::remove(fifo);
    ASSERT_TRUE(ends.ok()) << ends.error().message;
    EXPECT_EQ(ends->text, "");
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    EXPECT_EQ(*whole, "");
    ASSERT_TRUE(plain.has_value());
    EXPECT_EQ(*plain, "");
}

TEST(ReadFileEnds, ALineLongerThanWhatIsKeptIsLeftOutWhole) {
    // A key in a line is never cut in two: no piece of a line is kept.
    const std::string text = std::string(5000, 'k') + "\n" + std::string(5000, 'e') + "\n";
    const auto path = temp_file("ends-one-line", text);
    const auto ends = util::read_file_ends(path, 1000, 1000);
    std::filesystem::remove(path);
    ASSERT_TRUE(ends.ok());
    EXPECT_EQ(ends->left_out, text.size());
    EXPECT_EQ(ends->text.find('k'), std::string::npos);
    EXPECT_EQ(ends->text.find("ee"), std::string::npos);
}

namespace {

std::filesystem::path fresh_dir(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("diffeval-unit-replace-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

std::string contents(const std::filesystem::path& p) {
    return util::read_file(p).value_or("<unreadable>");
}

size_t entries(const std::filesystem::path& dir) {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                             std::filesystem::directory_iterator()));
}

} // namespace

// A report being written is never seen half-written: the old file stays
// until commit, then the new one is there whole, with the old one's mode.
TEST(ReplacingFile, TheOldFileStaysWholeUntilTheNewOneIsCommitted) {
    const auto dir = fresh_dir("commit");
    const auto path = dir / "report.html";
    std::ofstream(path) << "old report";
    ::chmod(path.c_str(), 0640);
    auto f = util::ReplacingFile::create(path.string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_TRUE(f->write("new "));
    std::fflush(f->stream());
    EXPECT_EQ(contents(path), "old report");
    ASSERT_TRUE(f->write("report"));
    ASSERT_TRUE(f->commit().ok());
    EXPECT_EQ(contents(path), "new report");
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    EXPECT_EQ(entries(dir), 1u); // no temporary left beside it
}

// A write that fails or is abandoned (an error half-way) leaves the old file
// and no temporary.
TEST(ReplacingFile, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
    const auto dir = fresh_dir("abandon");
    const auto path = dir / "junit.xml";
    std::ofstream(path) << "old";
    {
        auto f = util::ReplacingFile::create(path.string());
        ASSERT_TRUE(f.ok());
        ASSERT_TRUE(f->write("half of a new"));
    }
    EXPECT_EQ(contents(path), "old");
    EXPECT_EQ(entries(dir), 1u);
}

// A symbolic link to the output stays a link; the file it names is replaced.
TEST(ReplacingFile, ALinkStaysALinkAndItsFileIsReplaced) {
    const auto dir = fresh_dir("link");
    const auto real = dir / "real.md";
    const auto link = dir / "link.md";
    std::ofstream(real) << "old";
    std::filesystem::create_symlink(real, link);
    auto f = util::ReplacingFile::create(link.string());
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("new"));
    ASSERT_TRUE(f->commit().ok());
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_EQ(contents(real), "new");
}

// A directory in the output's place, or a missing parent, is an error
// naming the path, and nothing is created.
TEST(ReplacingFile, ADirectoryOrAMissingParentIsAnErrorNamingThePath) {
    const auto dir = fresh_dir("bad");
    std::filesystem::create_directories(dir / "report.html");
    auto taken = util::ReplacingFile::create((dir / "report.html").string());
    ASSERT_FALSE(taken.ok());
    EXPECT_NE(taken.error().message.find("report.html: Is a directory"), std::string::npos)
        << taken.error().message;
    auto missing = util::ReplacingFile::create((dir / "no" / "x.json").string());
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("x.json: No such file"), std::string::npos)
        << missing.error().message;
    EXPECT_EQ(entries(dir), 1u);
}

// Two writers of one path (two CI jobs): each leaves a whole file, never a
// mix of both.
TEST(ReplacingFile, TwoWritersOfOnePathEachLeaveAWholeFile) {
    const auto dir = fresh_dir("two");
    const auto path = dir / "summary.json";
    const std::string a(1 << 20, 'a');
    const std::string b(1 << 20, 'b');
    auto fa = util::ReplacingFile::create(path.string());
    auto fb = util::ReplacingFile::create(path.string());
    ASSERT_TRUE(fa.ok() && fb.ok());
    ASSERT_TRUE(fa->write(a.substr(0, a.size() / 2)));
    ASSERT_TRUE(fb->write(b));
    ASSERT_TRUE(fa->write(a.substr(a.size() / 2)));
    ASSERT_TRUE(fb->commit().ok());
    EXPECT_EQ(contents(path), b);
    ASSERT_TRUE(fa->commit().ok());
    EXPECT_EQ(contents(path), a);
    EXPECT_EQ(entries(dir), 1u);
}

// `--json /dev/stdout` in a CI step: a stream named by its descriptor is
// written through it, after what the process wrote there before, and the
// name is left as it was. Renaming a new file over it (which root may)
// replaced /dev/stdout, a link every process uses, with a regular file.
TEST(ReplacingFile, AStreamNamedByItsDescriptorIsWrittenThroughIt) {
    const auto dir = fresh_dir("descriptor");
    const auto path = dir / "stdout.txt";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "verdict\n", 8), 8);
    struct stat before {};
    ASSERT_EQ(::fstat(fd, &before), 0);
    for (const auto& name : {fmt::format("/dev/fd/{}", fd), fmt::format("/proc/self/fd/{}", fd)}) {
        auto f = util::ReplacingFile::create(name);
        ASSERT_TRUE(f.ok()) << name << ": " << f.error().message;
        ASSERT_TRUE(f->write("{}\n"));
        ASSERT_TRUE(f->commit().ok()) << name;
    }
    ::close(fd);
    EXPECT_EQ(contents(path), "verdict\n{}\n{}\n");
    struct stat after {};
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(entries(dir), 1u);
    // A descriptor that is not open is an error naming the path.
    auto closed = util::ReplacingFile::create("/dev/fd/987");
    ASSERT_FALSE(closed.ok());
    EXPECT_EQ(closed.error().message, "cannot write /dev/fd/987: Bad file descriptor");
}

// A FIFO (or a device) is written in place and stays what it is.
TEST(ReplacingFile, AFifoIsWrittenInPlaceAndStaysAFifo) {
    const auto dir = fresh_dir("fifo");
    const auto path = dir / "pipe";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    std::string got;
    // A blocking open, which waits for the writer: util::read_file reads a
    // FIFO nobody writes to yet as empty (it must not hang), and this
    // reader may well open first.
    std::thread reader([&] {
        std::ifstream in(path, std::ios::binary);
        got.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    });
    auto f = util::ReplacingFile::create(path.string());
    ASSERT_TRUE(f.ok()) << f.error().message;
    ASSERT_TRUE(f->write("through the pipe"));
    ASSERT_TRUE(f->commit().ok());
    reader.join();
    EXPECT_EQ(got, "through the pipe");
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    EXPECT_EQ(entries(dir), 1u);
}

// A device: /dev/full refuses the bytes (the error is the caller's), and
// /dev/null takes them; both stay devices.
TEST(ReplacingFile, ADeviceIsWrittenInPlaceAndStaysADevice) {
    auto full = util::ReplacingFile::create("/dev/full");
    ASSERT_TRUE(full.ok()) << full.error().message;
    ASSERT_TRUE(full->write("x"));
    auto done = full->commit();
    ASSERT_FALSE(done.ok());
    EXPECT_EQ(done.error().message, "cannot write /dev/full: No space left on device; free "
                                    "space, then run the same command again");
    auto null = util::ReplacingFile::create("/dev/null");
    ASSERT_TRUE(null.ok()) << null.error().message;
    ASSERT_TRUE(null->write("x"));
    EXPECT_TRUE(null->commit().ok());
    for (const char* device : {"/dev/full", "/dev/null"}) {
        struct stat st {};
        ASSERT_EQ(::lstat(device, &st), 0);
        EXPECT_TRUE(S_ISCHR(st.st_mode)) << device;
    }
}

// One file, one resolved name, whether or not it exists yet: a relative path
// none of whose parts existed resolved to itself, so "o.xml" and "./o.xml"
// (gate's --junit and --json) were two files.
TEST(ResolvedPath, TwoNamesOfOneFileResolveAlikeBeforeItExists) {
    const std::string name = "diffeval-unit-no-such-" + std::to_string(::getpid()) + ".xml";
    ASSERT_FALSE(std::filesystem::exists(name));
    EXPECT_EQ(util::resolved_path(name), util::resolved_path("./" + name));
    EXPECT_EQ(util::resolved_path(name),
              (std::filesystem::current_path() / name).lexically_normal().string());
    EXPECT_TRUE(std::filesystem::path(util::resolved_path("a/../b")).is_absolute());
}
