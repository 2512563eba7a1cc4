// The token embedding of a pass: token_embd is never a streamed layer. The
// pass's rows are gathered on the host (from a host-readable copy of
// token_embd when the tied head has one, else read from the file through an
// io::Reader, so the reader options and their fault injection apply) and
// sent with the tokens; the device embeds from that small table.
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/core/status_macros.h"
#include "runtime/llama/runner_impl.h"

namespace layerstream::llama {

Status LlamaRunner::Impl::gather_embedding_rows(int T) {
  const auto* ids = static_cast<const int32_t*>(tokens_host.data());
  auto* rows = static_cast<uint8_t*>(emb_rows_host.data());
  const GgufTensorInfo& te = m.token_embd;
  // A host-readable copy of token_embd: the tied head's RAM-tier buffer or
  // its resident region on a host-addressable device.
  const uint8_t* table = nullptr;
  if (m.output_tied && head_layer >= 0 && !opt.external_weights) {  // external: the placeholder is no copy
    const void* head = exec->ram_copy(head_layer);
    if (!head) head = exec->resident_host_view(head_layer);
    if (head) table = static_cast<const uint8_t*>(head) + (te.offset - span_begin[head_layer]);
  }
  if (!table) return read_embedding_rows(T);
  for (int t = 0; t < T; ++t)
    std::memcpy(rows + t * emb_row_bytes, table + static_cast<uint64_t>(ids[t]) * emb_row_bytes, emb_row_bytes);
  return Status::OK();
}

// All of the pass's rows are in flight at once; every completion is
// collected before an error returns, so no read still writes into the rows.
// The reader is opened the first time rows come from the file (a tied head
// with a host copy never needs it): buffered reads (rows are small and read
// again and again: the page cache serves them, at any offset and length)
// with the runner's reader options otherwise, fault injection included.
Status LlamaRunner::Impl::read_embedding_rows(int T) {
  if (!emb_reader) {
    io::ReaderOptions ro = opt.reader;
    ro.path = io::IoPath::kBuffered;
    auto rd = io::open_reader(path, ro);
    if (!rd.ok()) return rd.status().WithContext("the token embedding's reader");
    emb_reader = std::move(*rd);
  }
  const auto* ids = static_cast<const int32_t*>(tokens_host.data());
  auto* rows = static_cast<uint8_t*>(emb_rows_host.data());
  const uint64_t table = m.token_embd.offset;
  Status first_error;
  int submitted = 0;
  for (int t = 0; t < T; ++t) {
    const io::ReadRequest rq{table + static_cast<uint64_t>(ids[t]) * emb_row_bytes, emb_row_bytes,
                             rows + t * emb_row_bytes, static_cast<uint64_t>(t)};
    first_error = emb_reader->submit(rq);
    if (!first_error.ok()) break;
    ++submitted;
  }
  io::ReadCompletion done[16];
  for (int left = submitted; left > 0;) {
    LS_ASSIGN_OR_RETURN(size_t n, emb_reader->wait(done));
    if (n == 0) return Status::Internal("embedding rows of " + path + ": a read's completion was lost");
    left -= static_cast<int>(n);
    for (size_t i = 0; i < n && first_error.ok(); ++i) {
      const int32_t id = ids[done[i].tag];
      if (!done[i].status.ok())
        first_error = done[i].status.WithContext("read of token_embd row " + std::to_string(id));
      else if (done[i].bytes_read < emb_row_bytes)
        first_error = Status::IOError(path + ": token_embd row " + std::to_string(id) + " at offset " +
                                      std::to_string(table + uint64_t(id) * emb_row_bytes) +
                                      " is past the end of the file");
    }
  }
  return first_error;
}

Status LlamaRunner::Impl::embed(const Pass& p, Stream& s) {
  const int T = p.n_tokens;
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.emb_rows, emb_rows_host.data(), T * emb_row_bytes));
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.tokens, row_ids_host.data(), T * sizeof(int32_t)));
  LS_RETURN_IF_ERROR(s.copy_h2d(base() + lay.positions, pos_host.data(), T * sizeof(int32_t)));
  kernels::EmbeddingParams e;
  e.table = base() + lay.emb_rows;
  e.type = m.token_embd.type;
  e.n_vocab = T;  // the gathered rows: row t holds token t's embedding
  e.n_embd = m.hparams.n_embd;
  e.tokens = reinterpret_cast<const int32_t*>(base() + lay.tokens);
  e.n_tokens = T;
  e.out = f(lay.x);
  LS_RETURN_IF_ERROR(k->embedding(e, s));
  if (!m.hparams.traits.embed_scale) return Status::OK();
  const int64_t n = int64_t{T} * m.hparams.n_embd;
  return k->scale({f(lay.x), f(lay.x), n, std::sqrt(static_cast<float>(m.hparams.n_embd))}, s);
}

}  // namespace layerstream::llama
