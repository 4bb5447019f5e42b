// Declared shapes (shapes.h): the presets' data file, compiled in (model_shapes_data.cpp, made by CMake from
// gate/data/model_shapes.json), and the one reader of shapes documents — the presets' and the users'.
#include "attncheck/shapes.h"

#include "attncheck/run.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace attncheck::gate {

extern const char *const kModelShapesJson;  // model_shapes_data.cpp

namespace {
using json = nlohmann::json;

/// What a shapes document got wrong, before it is told which document ("shapes: FILE: …").
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The keys a shape object may have; a preset's shapes have "use" in place of "name".
constexpr std::string_view kKeys[] = {"name", "use", "B", "Hq", "Hkv", "Lq", "Lk", "D", "Dv", "causal", "window",
                                      "softcap"};

std::int64_t dimension(const json &o, const std::string &where, const char *key, std::int64_t fallback,
                       std::int64_t least) {
  if (!o.contains(key)) {
    if (fallback < 0) throw ShapeError(where + ": \"" + key + "\" is missing (give Hq, Lq, Lk and D at least)");
    return fallback;
  }
  const json &v = o.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < least)
    throw ShapeError(where + ": \"" + key + "\" must be an integer ≥ " + std::to_string(least) + ", not " + v.dump());
  return v.get<std::int64_t>();
}

/// Shape object `o` (the n-th of its document, 1-based), named `name` when it has no "name".
DeclaredShape shape_of(const json &o, const std::string &where, const std::string &name) {
  if (!o.is_object()) throw ShapeError(where + ": a shape is an object or a preset's name, not " + o.dump());
  for (const auto &[key, value] : o.items())
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      throw ShapeError(where + ": unknown key \"" + key +
                       "\" (keys: name, B, Hq, Hkv, Lq, Lk, D, Dv, causal, window, softcap)");
  DeclaredShape d;
  d.name = name;
  if (o.contains("name")) {
    if (!o.at("name").is_string()) throw ShapeError(where + ": \"name\" must be a string");
    d.name = o.at("name").get<std::string>();
  }
  Shape &s = d.shape;
  s.Hq = dimension(o, where, "Hq", -1, 1);
  s.B = dimension(o, where, "B", 1, 1);
  s.Hkv = dimension(o, where, "Hkv", s.Hq, 1);
  // Empty sequences are the empty_sequences property's: a declared shape has rows and keys.
  s.Lq = dimension(o, where, "Lq", -1, 1);
  s.Lk = dimension(o, where, "Lk", -1, 1);
  s.D = dimension(o, where, "D", -1, 1);
  s.Dv = dimension(o, where, "Dv", s.D, 1);
  if (s.Hq % s.Hkv != 0)
    throw ShapeError(where + fmt::format(": Hq = {} is not a multiple of Hkv = {}", s.Hq, s.Hkv));
  if (o.contains("causal")) {
    if (!o.at("causal").is_boolean()) throw ShapeError(where + ": \"causal\" must be true or false");
    d.causal = o.at("causal").get<bool>();
  }
  if (o.contains("window")) {
    const json &w = o.at("window");
    const auto side = [&](std::size_t i) {
      return w.is_array() && w.size() == 2 && w[i].is_number_integer() && w[i].get<std::int64_t>() >= -1;
    };
    if (!side(0) || !side(1))
      throw ShapeError(where + ": \"window\" must be [left, right], each ≥ 0 or −1 for unbounded, not " + w.dump());
    d.features |= ATTNCHECK_FEATURE_WINDOW;
    d.window_left = w[0].get<std::int64_t>();
    d.window_right = w[1].get<std::int64_t>();
  }
  if (o.contains("softcap")) {
    const json &c = o.at("softcap");
    if (!c.is_number() || !(c.get<double>() > 0) || !std::isfinite(c.get<double>()))
      throw ShapeError(where + ": \"softcap\" must be a number > 0, not " + c.dump());
    d.features |= ATTNCHECK_FEATURE_SOFTCAP;
    d.softcap = static_cast<double>(static_cast<float>(c.get<double>()));  // the ABI passes it as a float
  }
  return d;
}

/// The presets of the data file.
std::vector<ModelPreset> read_presets() {
  const json doc = json::parse(kModelShapesJson);
  std::vector<ModelPreset> presets;
  for (const json &p : doc.at("presets")) {
    ModelPreset m{.name = p.at("name").get<std::string>(), .source = p.at("source").get<std::string>(), .shapes = {}};
    for (const json &s : p.at("shapes"))
      m.shapes.push_back(shape_of(s, m.name, m.name + " " + s.at("use").get<std::string>()));
    presets.push_back(std::move(m));
  }
  return presets;
}

const ModelPreset *find_preset(std::string_view name) {
  for (const ModelPreset &p : model_presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string preset_names() {
  std::string names;
  for (const ModelPreset &p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

/// The shapes of document `text`.
std::vector<DeclaredShape> parse_shapes(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error &e) {
    throw ShapeError(fmt::format("not JSON: {}", e.what()));
  }
  if (doc.is_object() && doc.contains("shapes")) doc = json(doc.at("shapes"));
  if (!doc.is_array()) throw ShapeError("expected a JSON array of shapes (or {\"shapes\": [...]})");
  std::vector<DeclaredShape> shapes;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const json &e = doc[i];
    if (e.is_string()) {
      const ModelPreset *p = find_preset(e.get<std::string>());
      if (!p)
        throw ShapeError(fmt::format("shapes[{}]: no preset \"{}\" (presets: {})", i, e.get<std::string>(),
                                     preset_names()));
      shapes.insert(shapes.end(), p->shapes.begin(), p->shapes.end());
    } else {
      shapes.push_back(shape_of(e, fmt::format("shapes[{}]", i), fmt::format("shape {}", shapes.size() + 1)));
    }
  }
  if (shapes.empty()) throw ShapeError("no shapes: give a preset's name or at least one shape");
  return shapes;
}
}  // namespace

const std::vector<ModelPreset> &model_presets() {
  static const std::vector<ModelPreset> presets = read_presets();
  return presets;
}

std::vector<DeclaredShape> declared_shapes(std::string_view arg) {
  const auto usage = [](const std::string &what) { return RunError(kExitUsage, "shapes", what); };
  try {
    if (const ModelPreset *p = find_preset(arg)) return p->shapes;
    const std::size_t first = arg.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && (arg[first] == '[' || arg[first] == '{')) return parse_shapes(arg);
    std::ifstream in{std::string(arg)};
    if (!in)
      throw usage(fmt::format("'{}' is neither a preset ({}) nor a readable JSON file of shapes", arg, preset_names()));
    std::stringstream text;
    text << in.rdbuf();
    try {
      return parse_shapes(text.str());
    } catch (const ShapeError &e) {
      throw usage(std::string(arg) + ": " + e.what());
    }
  } catch (const ShapeError &e) {
    throw usage(e.what());
  }
}

}  // namespace attncheck::gate
