#include "tessera_corpus/family.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "tessera/error.hpp"
#include "tessera_corpus/radial.hpp"
#include "tessera_corpus/rng.hpp"
#include "tessera_corpus/sparsifier.hpp"
#include "tessera_corpus/sta.hpp"
#include "tessera_corpus/svg.hpp"

namespace tessera::corpus {

namespace {
constexpr const char* kWan720 = "wan2.1-14b-720p";
constexpr const char* kWan480 = "wan2.1-14b-480p";
constexpr const char* kWan5b = "wan2.2-ti2v-5b-704p";
constexpr const char* kHv720 = "hunyuanvideo-720p";
constexpr const char* kHv15_480 = "hunyuanvideo1.5-480p";
constexpr std::int64_t kCaseByteBudget = 96 * 1024;  // heads per case = budget / packed bytes per head
constexpr int kMaxHeads = 4;

// Real STA family layout: native B=384 at `layers` x sparse steps (+ dense step-0 cases), re-expressed at 128/64.
struct StaPlan {
  std::vector<int> layers;       // native layers (chunks)
  std::vector<int> steps;        // sparse steps
  int dense_cases;               // step-0 cases (all heads dense), on the first layers
  std::vector<std::pair<int, int>> fine128, fine64;  // (step, layer)
  // Appended later (generation 1, after every original case): more 64x64 re-expressions, so that the plan table
  // sees enough of the source where 64-token STA blocks want other plans than 384-token ones (bench/NOTES.md,
  // session 18: two b64 cases, one per split, could not form a leaf).
  std::vector<std::pair<int, int>> appended_fine64;
  int original() const { return dense_cases + int(layers.size() * steps.size() + fine128.size() + fine64.size()); }
  int total() const { return original() + int(appended_fine64.size()); }
};

StaPlan sta_plan(bool small) {
  StaPlan p;
  if (small) {
    p.layers = {10, 55};
    p.steps = {15, 30, 49};
    p.dense_cases = 1;
    p.fine128 = {{30, 10}};
    p.fine64 = {{30, 55}};
  } else {
    for (int l = 0; l <= 54; l += 6) p.layers.push_back(l);
    p.layers.push_back(59);
    for (int s = 15; s < 50; ++s) p.steps.push_back(s);
    p.dense_cases = 2;
    p.fine128 = {{20, 0}, {30, 6}, {45, 12}, {20, 30}, {30, 36}, {45, 42}, {30, 54}, {45, 59}};
    p.fine64 = {{30, 6}, {45, 59}};
    // Layers at even positions of `layers` are profiling, odd ones evaluation (sta_chunk_position).
    p.appended_fine64 = {{20, 0}, {40, 24}, {25, 48}, {35, 12}, {20, 18}, {40, 42}, {25, 54}, {35, 30}};
  }
  return p;
}

// Chunks (requests) per source, in two generations: `chunks` original ones, then `appended_chunks` added later
// (numbered chunks, chunks + 1, ...). All sources' original cases come first, in the original index order
// (source, chunk, within), so appending never changed an existing index or its content; the appended cases
// follow in the same (source, chunk, within) order.
struct SourcePlan {
  int chunks, steps_per_chunk, layers_per_chunk, appended_chunks;
  int per_chunk() const { return steps_per_chunk * layers_per_chunk; }
};
SourcePlan source_plan(bool small) { return small ? SourcePlan{2, 2, 2, 0} : SourcePlan{8, 7, 2, 16}; }

// Where case `index` of a model/rule family sits: its source, chunk (request) and position inside the chunk.
struct SourceCoords {
  const SourceSpec* src;
  int chunk, within, generation;
};

SourceCoords source_coords(const std::vector<const SourceSpec*>& srcs, const SourcePlan& sp, int index) {
  const int per_chunk = sp.per_chunk(), original = int(srcs.size()) * sp.chunks * per_chunk;
  const int generation = index < original ? 0 : 1;
  const int per_source = (generation == 0 ? sp.chunks : sp.appended_chunks) * per_chunk;
  const int i = generation == 0 ? index : index - original;
  const int first_chunk = generation == 0 ? 0 : sp.chunks;
  return {srcs[std::size_t(i / per_source)], first_chunk + (i % per_source) / per_chunk, i % per_chunk, generation};
}

std::shared_ptr<const StaTable> sta_table(const CorpusOptions& opt) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const StaTable>> cache;
  const std::string path = opt.sta_table.empty() ? default_sta_table_path() : opt.sta_table;
  if (path.empty()) throw Error(ErrorCode::kIoError, "sta_table", "the real STA table was not found (set TESSERA_STA_TABLE)");
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, std::make_shared<const StaTable>(load_sta_table(path))).first;
  return it->second;
}

std::vector<const SourceSpec*> family_sources(const std::string& fam) {
  std::vector<const SourceSpec*> v;
  for (const auto& s : sources())
    if (s.family == fam) v.push_back(&s);
  return v;
}

const BlockLayout& cached_layout(const std::string& model, const TokenOrder& order, int block) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<BlockLayout>> cache;
  const std::string key = fmt::format("{}|{}|{}", model, order.name(), block);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<BlockLayout>(make_block_layout(model_geometry(model).grid, order, block));
  return *slot;
}

std::string split_of(int chunk) { return chunk % 2 == 0 ? "profiling" : "evaluation"; }

std::string join_heads(const std::vector<int>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

std::string notes_json(const HeadNotes& notes) {
  std::string s = "[";
  for (std::size_t i = 0; i < notes.size(); ++i) s += (i ? ",\"" : "\"") + notes[i] + "\"";
  return s + "]";
}

// Where case `index` of the real STA family sits: denoising step, layer (its chunk), refinement factor of B=384.
struct StaCoords {
  int step, layer, factor, generation;
};

StaCoords sta_coords(const StaPlan& p, int index) {
  const int native = int(p.layers.size() * p.steps.size());
  StaCoords c{};
  if (index < p.dense_cases) {
    c = {0, p.layers[std::size_t(index)], 1, 0};
  } else if (index < p.dense_cases + native) {
    const int i = index - p.dense_cases;
    c = {p.steps[std::size_t(i) % p.steps.size()], p.layers[std::size_t(i) / p.steps.size()], 1, 0};
  } else if (index < p.dense_cases + native + int(p.fine128.size())) {
    const auto [s, l] = p.fine128[std::size_t(index - p.dense_cases - native)];
    c = {s, l, 3, 0};
  } else if (index < p.original()) {
    const auto [s, l] = p.fine64[std::size_t(index - p.dense_cases - native - int(p.fine128.size()))];
    c = {s, l, 6, 0};
  } else {
    const auto [s, l] = p.appended_fine64[std::size_t(index - p.original())];
    c = {s, l, 6, 1};
  }
  return c;
}

// STA-real: a chunk is a layer, and the split alternates over the position of the layer in the layer list.
int sta_chunk_position(const StaPlan& p, int layer) {
  return int(std::find(p.layers.begin(), p.layers.end(), layer) - p.layers.begin());
}

std::string sta_source_id(int factor) { return fmt::format("sta-hv768-b{}", 384 / factor); }

Case make_sta_case(int index, const CorpusOptions& opt) {
  const StaPlan p = sta_plan(opt.small);
  const StaCoords sc = sta_coords(p, index);
  const int step = sc.step, layer = sc.layer, factor = sc.factor;
  const auto tab = sta_table(opt);
  const int heads = tab->heads;
  PackedMask coarse(heads, kStaHunyuanTiles.tokens(), kStaHunyuanTiles.tokens());
  HeadNotes notes;
  std::vector<int> ids;
  for (int h = 0; h < heads; ++h) {
    const StaWindow w = tab->at(step, layer, h);
    sta_fill_head(coarse, h, kStaHunyuanTiles, w);
    notes.push_back(fmt::format("window=({},{},{})", w.t, w.h, w.w));
    ids.push_back(h);
  }
  Case c;
  c.mask = factor == 1 ? std::move(coarse) : refine_blocks(coarse, factor);
  auto& m = c.meta;
  m.family = "STA-real";
  m.source_id = sta_source_id(factor);
  m.model = "hunyuanvideo-768p";
  m.sparsifier = "sta";
  m.kind = "real";
  m.token_order = "tiled(6,8,8)";
  m.n_q = m.n_kv = m.tokens_real = 115200;
  m.block_q = m.block_kv = 384 / factor;
  m.heads = heads;
  m.head_ids = join_heads(ids);
  m.step = step;
  m.layer = layer;
  m.chunk = layer;
  m.seed = 0;  // real data: no randomness
  m.index = index;
  m.split = split_of(sta_chunk_position(p, layer));
  m.notes = notes_json(notes);
  return c;
}

}  // namespace

const std::vector<FamilySpec>& families() {
  static const std::vector<FamilySpec> f = {
      {"Q16K16", 16, 16, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q32K16", 32, 16, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q32K32", 32, 32, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q64K32", 64, 32, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q64K64-HD", 64, 64, 0.04, 0.065, "high sparsity, ~5 % density"},
      {"Q64K64", 64, 64, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q64K64-DD", 64, 64, 0.17, 0.23, "denser, ~20 % density"},
      {"Q128K64", 128, 64, 0.09, 0.12, "paper shape, ~10 % density"},
      {"Q128K128", 128, 128, 0.09, 0.12, "paper shape, ~10 % density"},
      {"STA-real", 384, 384, 0.155, 0.175, "real FastVideo STA table, HunyuanVideo 768p (sparse steps ~16.6 %)"},
  };
  return f;
}

const FamilySpec& family_spec(const std::string& name) {
  for (const auto& f : families())
    if (f.name == name) return f;
  std::string known;
  for (const auto& f : families()) known += (known.empty() ? "" : ", ") + f.name;
  throw Error(ErrorCode::kInvalidArgument, "family", fmt::format("unknown family '{}' (families: {})", name, known));
}

const std::vector<SourceSpec>& sources() {
  const TokenOrder R = TokenOrder::raster();
  static const std::vector<SourceSpec> s = {
      {"q16-sparge-wan5b", "Q16K16", kWan5b, "sparge", "model", R, 0.10, 0, 0},
      {"q16-vsa-wan5b", "Q16K16", kWan5b, "vsa", "model", TokenOrder::tiles(1, 4, 4), 0.90, 0, 0},
      {"q32k16-svg-wan5b", "Q32K16", kWan5b, "svg", "rule", R, 0.105, 10, 1},
      {"q32k16-sparge-wan480", "Q32K16", kWan480, "sparge", "model", R, 0.10, 0, 0},
      {"q32-vsa-wan480", "Q32K32", kWan480, "vsa", "model", TokenOrder::tiles(2, 4, 4), 0.90, 0, 0},
      {"q32-spade-wan5b", "Q32K32", kWan5b, "spade", "model", R, 0.075, 15, 1},
      {"q64k32-sparge-hv15-480", "Q64K32", kHv15_480, "sparge", "model", R, 0.10, 0, 0},
      {"q64k32-longcat-wan480", "Q64K32", kWan480, "longcat", "model", TokenOrder::tiles(4, 4, 4), 0.90, 0, 0},
      {"hd-vsa-wan5b", "Q64K64-HD", kWan5b, "vsa", "model", TokenOrder::tiles(4, 4, 4), 0.96, 0, 0},
      {"hd-longcat-wan480", "Q64K64-HD", kWan480, "longcat", "model", TokenOrder::tiles(4, 4, 4), 0.9375, 0, 0},
      {"q64-vsa-wan720", "Q64K64", kWan720, "vsa", "model", TokenOrder::tiles(4, 4, 4), 0.90, 0, 0},
      {"q64-sparge-hv15-480", "Q64K64", kHv15_480, "sparge", "model", R, 0.10, 0, 0},
      {"q64-ssta-hv15-480", "Q64K64", kHv15_480, "ssta", "model", TokenOrder::tiles(4, 4, 4), 68, 0, 0},
      {"dd-radial-wan480", "Q64K64-DD", kWan480, "radial", "rule", R, 0.2, 12, 1},
      {"dd-spade-wan720", "Q64K64-DD", kWan720, "spade", "model", R, 0.17, 15, 1},
      {"q128k64-sparge-wan720", "Q128K64", kWan720, "sparge", "model", R, 0.10, 0, 0},
      {"q128k64-svg-hv15-480", "Q128K64", kHv15_480, "svg", "rule", R, 0.105, 5, 1},
      {"q128-svg-wan720", "Q128K128", kWan720, "svg", "rule", R, 0.105, 10, 1},
      {"q128-sparge-hv720", "Q128K128", kHv720, "sparge", "model", R, 0.10, 0, 0},
  };
  return s;
}

std::vector<std::string> selected_families(const CorpusOptions& opt) {
  std::vector<std::string> v;
  if (opt.families.empty()) {
    for (const auto& f : families()) v.push_back(f.name);
  } else {
    for (const auto& f : opt.families) {
      const std::string& name = family_spec(f).name;
      if (std::find(v.begin(), v.end(), name) != v.end())
        throw Error(ErrorCode::kInvalidArgument, "families", fmt::format("'{}' is given more than once", name));
      v.push_back(name);
    }
  }
  return v;
}

void check_inputs(const CorpusOptions& opt) {
  const auto fams = selected_families(opt);
  if (std::find(fams.begin(), fams.end(), "STA-real") != fams.end()) (void)sta_table(opt);
}

int case_count(const std::string& family, const CorpusOptions& opt) {
  family_spec(family);
  if (family == "STA-real") return sta_plan(opt.small).total();
  const SourcePlan sp = source_plan(opt.small);
  return int(family_sources(family).size()) * (sp.chunks + sp.appended_chunks) * sp.per_chunk();
}

namespace {

void check_case_index(const std::string& family, int index, const CorpusOptions& opt) {
  const int total = case_count(family, opt);
  if (index < 0 || index >= total)
    throw Error(ErrorCode::kInvalidArgument, "index", fmt::format("case {} of family {} outside [0, {})", index, family, total));
}

}  // namespace

CaseOrigin case_origin(const std::string& family, int index, const CorpusOptions& opt) {
  check_case_index(family, index, opt);
  if (family == "STA-real") {
    const StaPlan p = sta_plan(opt.small);
    const StaCoords c = sta_coords(p, index);
    return {sta_source_id(c.factor), c.layer, split_of(sta_chunk_position(p, c.layer)), c.generation};
  }
  const SourceCoords c = source_coords(family_sources(family), source_plan(opt.small), index);
  return {c.src->id, c.chunk, split_of(c.chunk), c.generation};
}

namespace {

// Case `index` of a model/rule family: the stored case's heads, or (whole) every head of the model's layer.
Case make_model_case(const std::string& family, int index, const CorpusOptions& opt, bool whole) {
  const FamilySpec& fam = family_spec(family);
  const SourcePlan sp = source_plan(opt.small);
  const SourceCoords at = source_coords(family_sources(family), sp, index);
  const SourceSpec& src = *at.src;
  const int chunk = at.chunk, within = at.within;
  const ModelGeometry& model = model_geometry(src.model);
  const BlockLayout& lq = cached_layout(src.model, src.order, fam.block_q);
  const BlockLayout& lkv = cached_layout(src.model, src.order, fam.block_kv);

  // The request (chunk): its seed, steps, layers and heads.
  const std::uint64_t req = hash_combine(hash_combine(opt.seed, hash_string(src.id)), std::uint64_t(chunk));
  Rng r(req);
  const int first_step = src.dense_steps, span = model.steps - first_step;
  const int offset = int(r.below(std::uint64_t(std::max(1, span / sp.steps_per_chunk))));
  const int layer_span = model.layers - src.dense_layers;
  std::vector<int> layers;
  while (int(layers.size()) < sp.layers_per_chunk) {
    const int l = src.dense_layers + int(r.below(std::uint64_t(layer_span)));
    if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
  }
  std::sort(layers.begin(), layers.end());
  const std::int64_t head_bytes = lq.n_blocks * ((lkv.n_blocks + 7) / 8);
  const int heads = int(std::clamp<std::int64_t>(kCaseByteBudget / head_bytes, 1, std::min(kMaxHeads, model.heads)));
  const int head0 = int(r.below(std::uint64_t(model.heads)));

  const int si = within / sp.layers_per_chunk, li = within % sp.layers_per_chunk;
  CaseContext ctx;
  ctx.q = &lq;
  ctx.kv = &lkv;
  ctx.layer = layers[std::size_t(li)];
  ctx.layers = model.layers;
  ctx.step = first_step + (si * span / sp.steps_per_chunk + offset) % span;
  ctx.steps = model.steps;
  ctx.request_seed = req;
  // The whole request draws exactly what the stored case draws (head0 included), then takes every head in
  // model order: each generator fills a head from (request, layer, step, head id) alone, so the stored case's head h
  // is the whole request's head (head0 + h) % model.heads, bit for bit.
  const int mask_heads = whole ? model.heads : heads;
  for (int h = 0; h < mask_heads; ++h) ctx.head_ids.push_back(whole ? h : (head0 + h) % model.heads);

  Case c;
  c.mask = PackedMask(mask_heads, lq.n_blocks, lkv.n_blocks);
  HeadNotes notes;
  if (src.sparsifier == "vsa") vsa_model(ctx, src.param, c.mask, notes);
  else if (src.sparsifier == "longcat") longcat_model(ctx, src.param, c.mask, notes);
  else if (src.sparsifier == "sparge") sparge_model(ctx, src.param, c.mask, notes);
  else if (src.sparsifier == "ssta") ssta_model(ctx, int(src.param), c.mask, notes);
  else if (src.sparsifier == "spade") spade_model(ctx, src.param, 10, 2, c.mask, notes);
  else if (src.sparsifier == "svg") svg_model(ctx, src.param, c.mask, notes);
  else if (src.sparsifier == "radial") radial_model(ctx, src.param, c.mask, notes);
  else throw Error(ErrorCode::kInternal, "sparsifier", "unknown sparsifier " + src.sparsifier);

  auto& m = c.meta;
  m.family = family;
  m.source_id = src.id;
  m.model = src.model;
  m.sparsifier = src.sparsifier;
  m.kind = src.kind;
  m.token_order = src.order.name();
  m.n_q = lq.seq_len;
  m.n_kv = lkv.seq_len;
  m.tokens_real = model.grid.tokens();
  m.block_q = fam.block_q;
  m.block_kv = fam.block_kv;
  m.heads = mask_heads;
  m.head_ids = join_heads(ctx.head_ids);
  m.step = ctx.step;
  m.layer = ctx.layer;
  m.chunk = chunk;
  m.seed = opt.seed;
  m.index = index;
  m.split = split_of(chunk);
  m.notes = notes_json(notes);
  return c;
}

}  // namespace

Case make_case(const std::string& family, int index, const CorpusOptions& opt) {
  check_case_index(family, index, opt);
  if (family == "STA-real") return make_sta_case(index, opt);
  return make_model_case(family, index, opt, false);
}

int request_heads(const std::string& family, int index, const CorpusOptions& opt) {
  check_case_index(family, index, opt);
  if (family == "STA-real") return sta_table(opt)->heads;
  return model_geometry(source_coords(family_sources(family), source_plan(opt.small), index).src->model).heads;
}

Case make_whole_request(const std::string& family, int index, const CorpusOptions& opt) {
  check_case_index(family, index, opt);
  if (family == "STA-real") return make_sta_case(index, opt);  // its cases already hold all 24 heads
  return make_model_case(family, index, opt, true);
}

}  // namespace tessera::corpus
