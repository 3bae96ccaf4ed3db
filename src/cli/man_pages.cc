#include "cli/man_pages.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tessera {
namespace {

// One character of plain text as roff: backslash and hyphen escaped (a hyphen as
// `\-`, so that options copied from the rendered page still work), non-ASCII UTF-8
// sequences as \[uXXXX].
void AppendRoffChars(std::string_view text, std::string* out) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      *out += "\\e";
    } else if (c == '-') {
      *out += "\\-";
    } else if (c < 0x80) {
      *out += static_cast<char>(c);
    } else {
      // A UTF-8 sequence: its code point, or U+FFFD when it is malformed.
      int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : -1;
      uint32_t cp = extra == 3 ? (c & 0x07u) : extra == 2 ? (c & 0x0fu) : (c & 0x1fu);
      bool ok = extra > 0;
      for (int k = 1; ok && k <= extra; ++k) {
        const size_t at = i + static_cast<size_t>(k);
        ok = at < text.size() && (static_cast<unsigned char>(text[at]) & 0xc0u) == 0x80u;
        if (ok) {
          cp = (cp << 6) | (static_cast<unsigned char>(text[at]) & 0x3fu);
        }
      }
      if (ok) {
        i += static_cast<size_t>(extra);
      } else {
        cp = 0xfffd;
      }
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\[u%04X]", static_cast<unsigned>(cp));
      *out += buf;
    }
  }
}

// Option names as the page shows them: "\fB\-o\fR, \fB\-\-output\fR".
std::string Bold(const std::string& text) {
  std::string out = "\\fB";
  AppendRoffChars(text, &out);
  return out + "\\fR";
}

std::string Italic(const std::string& text) {
  std::string out = "\\fI";
  AppendRoffChars(text, &out);
  return out + "\\fR";
}

bool Visible(const CLI::App* sub) {
  return !sub->get_name().empty() && !sub->get_group().empty() && !sub->get_disabled();
}

std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return Visible(sub); });
}

// The command's words from the root: {"tessera", "sim", "jobs"}.
std::vector<std::string> CommandPath(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::App* at = &app; at != nullptr; at = at->get_parent()) {
    words.insert(words.begin(), at->get_name());
  }
  return words;
}

std::string JoinWords(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const std::string& w : words) {
    out += out.empty() ? "" : sep;
    out += w;
  }
  return out;
}

std::string PageName(const CLI::App& app) { return JoinWords(CommandPath(app), "-"); }

std::string SeeAlso(const CLI::App& app) { return "\\fB" + RoffText(PageName(app)) + "\\fR(1)"; }

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n') {
      c = ' ';
    }
  }
  while (!text.empty() && text.back() == ' ') {
    text.pop_back();
  }
  return text;
}

// "TEXT", "INT", "TEXT:{a,b}" as CLI11 names an option's value in --help; empty for a
// flag.
std::string ValueName(const CLI::Option& opt) {
  if (!opt.get_option_text().empty()) {
    return opt.get_option_text();
  }
  return opt.get_type_size() == 0 ? "" : opt.get_type_name();
}

void WriteOption(const CLI::Option& opt, std::ostream& out) {
  out << ".TP\n";
  std::string names;
  for (const std::string& s : opt.get_snames()) {
    names += (names.empty() ? "" : ", ") + Bold("-" + s);
  }
  for (const std::string& l : opt.get_lnames()) {
    names += (names.empty() ? "" : ", ") + Bold("--" + l);
  }
  if (names.empty()) {  // an environment-only option
    names = Bold(opt.get_name());
  }
  const std::string value = ValueName(opt);
  out << names << (value.empty() ? "" : " " + Italic(value)) << "\n";
  std::string desc = opt.get_description();
  std::vector<std::string> notes;
  if (!opt.get_default_str().empty()) {
    notes.push_back("default: " + opt.get_default_str());
  }
  if (opt.get_required()) {
    notes.push_back("required");
  }
  if (opt.get_expected_max() >= CLI::detail::expected_max_vector_size ||
      opt.get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll) {
    notes.push_back("may be given more than once");
  }
  if (!opt.get_envname().empty()) {
    notes.push_back("environment: " + opt.get_envname());
  }
  if (!notes.empty()) {
    desc += (desc.empty() ? "[" : " [") + JoinWords(notes, "; ") + "]";
  }
  out << RoffText(desc.empty() ? "(no description)" : desc) << "\n";
}

void WriteSynopsis(const CLI::App& app, std::ostream& out) {
  out << ".SH SYNOPSIS\n" << Bold(JoinWords(CommandPath(app), " "));
  const std::vector<const CLI::Option*> named = app.get_options(
      [](const CLI::Option* o) { return o->nonpositional() && !o->get_group().empty(); });
  if (!named.empty()) {
    out << " [" << Italic("OPTIONS") << "]";
  }
  for (const CLI::Option* p :
       app.get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    std::string word = Italic(p->get_name(true, false));
    if (p->get_expected_max() > 1) {
      word += "...";
    }
    out << " " << (p->get_required() ? word : "[" + word + "]");
  }
  if (!VisibleSubcommands(app).empty()) {
    const std::string word = Italic("COMMAND");
    out << " " << (app.get_require_subcommand_min() == 0 ? "[" + word + "]" : word);
  }
  out << "\n";
}

std::string WritePage(const CLI::App& app, const ManPageOptions& options, const std::string& dir) {
  const std::string name = PageName(app);
  std::ostringstream out;
  std::string upper = name;
  for (char& c : upper) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  out << ".\\\" Written by `tessera man` from the command's own help: do not edit.\n"
      << ".TH \"" << RoffText(upper) << "\" \"1\" \"\" \"" << RoffText(options.version)
      << "\" \"Tessera Manual\"\n"
      << ".nh\n.ad l\n"  // no hyphenation (options and page names), ragged right
      << ".SH NAME\n"
      << RoffText(name) << " \\- " << RoffText(OneLine(app.get_description())) << "\n";
  WriteSynopsis(app, out);
  out << ".SH DESCRIPTION\n" << RoffText(app.get_description()) << "\n";
  if (const std::string footer = app.get_footer(); !footer.empty()) {
    out << ".PP\n" << RoffText(footer) << "\n";
  }
  const std::vector<const CLI::App*> subs = VisibleSubcommands(app);
  if (!subs.empty()) {
    out << ".SH COMMANDS\n";
    for (const CLI::App* sub : subs) {
      out << ".TP\n"
          << Bold(JoinWords(CommandPath(*sub), " ")) << "\n"
          << RoffText(OneLine(sub->get_description())) << " (" << SeeAlso(*sub) << ")\n";
    }
  }
  const std::vector<const CLI::Option*> positionals = app.get_options(
      [](const CLI::Option* o) { return o->get_positional() && !o->get_group().empty(); });
  if (!positionals.empty()) {
    out << ".SH ARGUMENTS\n";
    for (const CLI::Option* p : positionals) {
      out << ".TP\n"
          << Italic(p->get_name(true, false)) << "\n"
          << RoffText(p->get_description().empty() ? "(no description)" : p->get_description())
          << (p->get_required() ? " [required]" : "") << "\n";
    }
  }
  bool options_heading = false;
  for (const std::string& group : app.get_groups()) {
    const std::vector<const CLI::Option*> opts = app.get_options(
        [&group](const CLI::Option* o) { return o->nonpositional() && o->get_group() == group; });
    if (group.empty() || opts.empty()) {
      continue;  // hidden options
    }
    if (!options_heading) {
      out << ".SH OPTIONS\n";
      options_heading = true;
    }
    if (group != "Options" && group != "OPTIONS") {
      out << ".SS " << RoffText(group) << "\n";
    }
    for (const CLI::Option* o : opts) {
      WriteOption(*o, out);
    }
  }
  if (app.get_parent() == nullptr) {
    out << options.root_extra;
  }
  std::vector<std::string> see;
  if (app.get_parent() != nullptr) {
    see.push_back(SeeAlso(*app.get_parent()));
  }
  for (const CLI::App* sub : subs) {
    see.push_back(SeeAlso(*sub));
  }
  if (!see.empty()) {
    out << ".SH SEE ALSO\n" << JoinWords(see, ",\n") << "\n";
  }
  const std::string path = dir + "/" + name + ".1";
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << out.str();
  file.close();
  if (!file) {
    return "cannot write " + path;
  }
  return "";
}

std::string WriteTree(const CLI::App& app, const ManPageOptions& options, const std::string& dir) {
  const bool root = app.get_parent() == nullptr;
  if (!root || options.write_root) {
    if (std::string err = WritePage(app, options, dir); !err.empty()) {
      return err;
    }
  }
  for (const CLI::App* sub : VisibleSubcommands(app)) {
    if (root && options.skip != nullptr && options.skip(sub->get_name())) {
      continue;
    }
    if (std::string err = WriteTree(*sub, options, dir); !err.empty()) {
      return err;
    }
  }
  return "";
}

}  // namespace

std::string RoffText(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    if (!first) {
      out += "\n";
    }
    first = false;
    if (line.find_first_not_of(' ') == std::string::npos) {
      out += ".sp";
      continue;
    }
    // A control character at the start of a line would be read as a request.
    if (line[0] == '.' || line[0] == '\'') {
      out += "\\&";
    }
    // `code` in bold; a lone backquote as itself.
    size_t at = 0;
    while (at < line.size()) {
      const size_t open = line.find('`', at);
      const size_t close = open == std::string::npos ? open : line.find('`', open + 1);
      if (close == std::string::npos) {
        for (size_t tick = line.find('`', at); tick != std::string::npos;
             tick = line.find('`', at)) {
          AppendRoffChars(std::string_view(line).substr(at, tick - at), &out);
          out += "\\(ga";
          at = tick + 1;
        }
        AppendRoffChars(std::string_view(line).substr(at), &out);
        break;
      }
      AppendRoffChars(std::string_view(line).substr(at, open - at), &out);
      out += "\\fB";
      AppendRoffChars(std::string_view(line).substr(open + 1, close - open - 1), &out);
      out += "\\fR";
      at = close + 1;
    }
  }
  return out;
}

std::string WriteManPages(const CLI::App& app, const ManPageOptions& options,
                          const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return "cannot make " + dir + ": " + ec.message();
  }
  return WriteTree(app, options, dir);
}

void AddManCommand(CLI::App& app, ManPageOptions options, int (*after)(const std::string& dir),
                   int* exit_code) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("man", "Write the manual pages (roff) into a directory");
  cmd->group("");  // hidden: a build step, not a user command
  cmd->add_option("--out", *dir, "Directory of the pages (made if missing)")->required();
  cmd->callback([&app, options, after, dir, exit_code] {
    if (std::string err = WriteManPages(app, options, *dir); !err.empty()) {
      std::cerr << "tessera man: " << err << "\n";
      *exit_code = 1;
      return;
    }
    *exit_code = after != nullptr ? after(*dir) : 0;
  });
}

}  // namespace tessera
