// SharedText: an immutable string whose copies share one allocation. A job's stored spec
// text is held by its row in memory, by every write of that row and by its published
// view; with a plain string each of them was a copy (a third of a pending job's memory).
// Thread safety: a const value; copies may be used from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace tessera {

class SharedText {
 public:
  SharedText() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): stands in for std::string fields
  SharedText(std::string text) {
    if (!text.empty()) {
      text.shrink_to_fit();  // kept for long: not the slack of however it was built
      text_ = std::make_shared<const std::string>(std::move(text));
    }
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  SharedText(const char* text) : SharedText(std::string(text)) {}

  const std::string& str() const { return text_ != nullptr ? *text_ : Empty(); }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator const std::string&() const { return str(); }
  bool empty() const { return text_ == nullptr; }
  size_t size() const { return str().size(); }

  friend bool operator==(const SharedText& a, const SharedText& b) {
    return a.text_ == b.text_ || a.str() == b.str();
  }
  friend std::ostream& operator<<(std::ostream& out, const SharedText& t) { return out << t.str(); }

 private:
  static const std::string& Empty() {
    static const std::string empty;
    return empty;
  }
  std::shared_ptr<const std::string> text_;
};

}  // namespace tessera
