// Writes the seed corpora of the fuzz targets (tests/fuzz/seeds/<target>/) from the project's own files and code:
//   mask_file      encode_mask_file of small cropped corpus cases (every model/rule family) and a few tiny masks
//   plan_table     the embedded src/core/plan_tables/*.json and one-tree excerpts of them
//   profile_records  the first records of the committed bench/results profile files (plain and gzip)
//   plan_id        the ids of the plans enumerate_plans yields over the catalog for a few request keys
//   sta_table      the 2x3x4 corner of the real STA table (corpus/data) with its keys renumbered
//   mask_state     a few hand-made inputs per mask format
// Usage: tessera_fuzz_seeds <source dir> <out dir>. Run by scripts/fuzz.sh seeds; the output is committed.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "core/catalog.hpp"
#include "core/embedded_tables.hpp"
#include "core/selector.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/mask_file.hpp"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string gunzip_head(const fs::path& p, int lines) {
  gzFile f = gzopen(p.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while (n < lines && gzgets(f, buf, sizeof buf)) {
    out += buf;
    ++n;
  }
  gzclose(f);
  return out;
}

std::string gzip(const std::string& s) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, uLong(s.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  zs.avail_in = uInt(s.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: tessera_fuzz_seeds <source dir> <out dir>\n";
    return 2;
  }
  const fs::path src = argv[1], out = argv[2];
  using namespace tessera;

  // mask_file: every model/rule family's first small case, cropped to a few heads and blocks.
  corpus::CorpusOptions opt;
  opt.small = true;
  int i = 0;
  for (const auto& fam : corpus::families()) {
    if (fam.name == "STA-real") continue;
    corpus::Case c = corpus::make_case(fam.name, 0, opt);
    const std::int64_t heads = std::min<std::int64_t>(c.mask.heads, 2), n_qb = std::min<std::int64_t>(c.mask.n_qb, 6),
                       n_kvb = std::min<std::int64_t>(c.mask.n_kvb, 13);
    corpus::PackedMask m(heads, n_qb, n_kvb);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t q = 0; q < n_qb; ++q)
        for (std::int64_t k = 0; k < n_kvb; ++k)
          if (c.mask.get(h, q, k)) m.set(h, q, k);
    c.mask = m;
    c.meta.heads = int(heads);
    c.meta.n_q = n_qb * c.meta.block_q - 1;
    c.meta.n_kv = n_kvb * c.meta.block_kv;
    c.meta.tokens_real = std::min(c.meta.n_q, c.meta.n_kv);
    c.meta.head_ids = heads == 1 ? "0" : "0,1";
    c.meta.notes = heads == 1 ? "[\"\"]" : "[\"\",\"\"]";
    try {
      const auto bytes = corpus::encode_mask_file(c);
      write(out / "mask_file" / ("case" + std::to_string(i++) + ".safetensors"), std::string(bytes.begin(), bytes.end()));
    } catch (const std::exception& e) {
      std::cerr << fam.name << ": " << e.what() << "\n";
    }
  }

  // plan_table: the embedded tables, and each with only its first tree.
  for (const auto& t : embedded_plan_tables()) {
    write(out / "plan_table" / (std::string(t.arch) + ".json"), std::string(t.json));
    nlohmann::json j = nlohmann::json::parse(t.json);
    if (j.contains("tables") && j["tables"].is_array() && j["tables"].size() > 1)
      j["tables"] = nlohmann::json::array({j["tables"][0]});
    write(out / "plan_table" / (std::string(t.arch) + "_one_tree.json"), j.dump());
  }

  // profile_records: the head of each committed records file.
  i = 0;
  for (const auto& e : fs::recursive_directory_iterator(src / "bench/results")) {
    const std::string name = e.path().filename().string();
    if (name.find("profile") != 0 || e.path().extension() != ".gz") continue;
    const std::string head = gunzip_head(e.path(), 4);
    write(out / "profile_records" / ("head" + std::to_string(i) + ".jsonl"), head);
    if (i == 0) write(out / "profile_records" / "head0.jsonl.gz", gzip(head));
    if (++i == 4) break;
  }

  // plan_id: the candidates of a few request keys.
  std::vector<std::string> ids;
  for (int d : {64, 128})
    for (int bq : {64, 128})
      for (int bkv : {32, 64, 128, 384}) {
        EligibilityRequest r;
        r.head_dim = d;
        r.block_q = bq;
        r.block_kv = bkv;
        r.query_tiles = 64;
        CandidateOptions o;
        o.splits = {1, 4};
        o.traversals = {Traversal::kAscending, Traversal::kRunMajor};
        for (const Plan& p : enumerate_plans(catalog(), r, o)) ids.push_back(plan_id(p));
      }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (std::size_t k = 0; k < ids.size(); k += std::max<std::size_t>(1, ids.size() / 24))
    write(out / "plan_id" / ("id" + std::to_string(k)), ids[k]);
  write(out / "plan_id" / "persistent", "sm90a.mma.bf16.d128.q64c2.kv64p2.g4p.trun.split2.s2.w8");

  // sta_table: the corner [0,2) x [0,3) x [0,4) of the real table.
  {
    std::ifstream in(src / "corpus/data/sta_mask_strategy_hunyuan_768x1280x117.json");
    const nlohmann::json real = nlohmann::json::parse(in);
    nlohmann::json small = nlohmann::json::object();
    for (int s = 0; s < 2; ++s)
      for (int l = 0; l < 3; ++l)
        for (int h = 0; h < 4; ++h) {
          const std::string k = std::to_string(s) + "_" + std::to_string(l) + "_" + std::to_string(h);
          small[k] = real.at(k);
        }
    write(out / "sta_table" / "corner.json", small.dump());
    write(out / "sta_table" / "corner_indented.json", small.dump(1));
  }

  // mask_state: byte strings read by fuzz_mask_state.cpp's Bytes (format, B_Q, B_KV, B_m, H_m, n_qb, n_kvb, ...).
  for (int fmt = 0; fmt < 3; ++fmt)
    for (int v = 0; v < 3; ++v) {
      std::string s;
      s += char(fmt);
      s += char(3 + v);   // block_q 64 / 96 / 128
      s += char(3);       // block_kv 64
      s += char(v % 2);   // B_m - 1
      s += char(v);       // H_m - 1
      s += char(3 + v);   // n_qb
      s += char(5 + 2 * v);
      s += char(v == 1);  // strided
      s += char(0);       // no corruption
      for (int k = 0; k < 200; ++k) s += char((k * 37 + v * 11 + fmt) & 0xFF);
      write(out / "mask_state" / ("fmt" + std::to_string(fmt) + "_" + std::to_string(v)), s);
    }
  std::cout << "seeds written to " << out << "\n";
  return 0;
}
