#include "core/yaml_load.hpp"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/bounded_file.hpp"
#include "core/utf8.hpp"

namespace assay {

namespace {

struct TooManyNodes {
  YAML::Mark mark;
};
/// An alias inside the collection its anchor names ("a: &a [*a]"): yaml-cpp builds a cyclic
/// node graph that every walk of the configuration would follow for ever (the fuzzer found
/// one that took 2 GiB).
struct CyclicAlias {
  YAML::Mark mark;
};

/// Counts the nodes of a document as a consumer walking it would see them: an alias counts as
/// the whole subtree of its anchor. Counts saturate: parsing stops (TooManyNodes) the moment
/// the total passes kMaxYamlNodes, so a bomb costs no more than its own bytes to reject.
class NodeCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const auto& o : stack_)
      if (o.anchor == anchor && anchor != YAML::NullAnchor) throw CyclicAlias{mark};
    const auto it = sizes_.find(anchor);
    add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    std::size_t nodes;
  };
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) sizes_[anchor] = 1;
    add(mark, 1);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    count(mark, 1);
    stack_.push_back({anchor, 1});
  }
  void close() {
    if (stack_.empty()) return;
    const Open o = stack_.back();
    stack_.pop_back();
    if (o.anchor != YAML::NullAnchor) sizes_[o.anchor] = o.nodes;
    if (!stack_.empty()) stack_.back().nodes += o.nodes;
  }
  /// `n` more nodes in the innermost open collection (a collection's own size reaches its
  /// parent when it closes).
  void add(const YAML::Mark& mark, std::size_t n) {
    count(mark, n);
    if (!stack_.empty()) stack_.back().nodes += n;
  }
  void count(const YAML::Mark& mark, std::size_t n) {
    total_ += n;
    if (total_ > kMaxYamlNodes) throw TooManyNodes{mark};
  }

  std::vector<Open> stack_;
  std::unordered_map<YAML::anchor_t, std::size_t> sizes_;
  std::size_t total_ = 0;
};

YamlProblem at(const YAML::Mark& mark, std::string message) {
  const bool known = !mark.is_null();
  return {known ? mark.line + 1 : 0, known ? mark.column + 1 : 0, std::move(message)};
}

}  // namespace

std::optional<YamlProblem> loadYaml(const std::string& text, YAML::Node& root) {
  if (const std::size_t bad = firstInvalidUtf8(text); bad < text.size()) {
    const std::size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    const std::size_t col0 =
        line_start == std::string::npos || bad == 0 ? bad : bad - line_start - 1;
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(text[bad]));
    return YamlProblem{
        static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n')) + 1,
        static_cast<int>(col0) + 1,
        std::string("not UTF-8: byte ") + hex +
            " does not start a well-formed character (a configuration file is UTF-8)"};
  }
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    NodeCounter counter;
    parser.HandleNextDocument(counter);
  } catch (const TooManyNodes& e) {
    return at(e.mark, "more than " + std::to_string(kMaxYamlNodes) +
                          " YAML nodes once aliases are expanded (an alias bomb?)");
  } catch (const CyclicAlias& e) {
    return at(e.mark, "an alias inside the collection its anchor names (a cycle)");
  } catch (const YAML::Exception& e) {
    return at(e.mark, "YAML syntax error: " + e.msg);
  }
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return at(e.mark, "YAML syntax error: " + e.msg);
  }
  return std::nullopt;
}

std::optional<YamlProblem> readYamlFile(const std::string& path, std::string& text) {
  if (auto why = readRegularFile(path, kMaxConfigBytes, text); !why.empty())
    return YamlProblem{0, 0, std::move(why)};
  return std::nullopt;
}

}  // namespace assay
