#include "examples/cli/sampling_flags.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <map>

#include "runtime/core/status_macros.h"

namespace layerstream::cli {
namespace {

// The flag of each SamplingOptions field.
const std::map<std::string, std::string>& flag_of_field() {
  static const std::map<std::string, std::string> m = {
      {"temperature", "--temp"},           {"top_k", "--top-k"},
      {"top_p", "--top-p"},                {"min_p", "--min-p"},
      {"typical_p", "--typical-p"},        {"repeat_penalty", "--repeat-penalty"},
      {"repeat_last_n", "--repeat-last-n"}, {"presence_penalty", "--presence-penalty"},
      {"frequency_penalty", "--frequency-penalty"}, {"logit_bias", "--logit-bias"}};
  return m;
}

// "15+1.5", "15-2", "15-inf" (a ban), as llama.cpp writes a logit bias.
Status parse_bias(const std::string& text, std::map<int32_t, float>& out) {
  const size_t sign = text.find_first_of("+-", 1);
  const Status bad = Status::InvalidArgument("--logit-bias: '" + text +
                                             "' is not TOKEN+BIAS or TOKEN-BIAS (e.g. 15+1.5, 15-inf to ban 15)");
  if (sign == std::string::npos) return bad;
  try {
    size_t used = 0;
    const long token = std::stol(text.substr(0, sign), &used);
    if (used != sign || token < 0 || token > INT32_MAX) return bad;
    const std::string value = text.substr(sign);
    float bias = 0;
    if (value == "-inf") {
      bias = -INFINITY;
    } else {
      bias = std::stof(value, &used);
      if (used != value.size()) return bad;
    }
    out[static_cast<int32_t>(token)] = bias;
  } catch (const std::exception&) {
    return bad;
  }
  return Status::OK();
}

// The whole of `path`, or InvalidArgument naming the flag.
Result<std::string> read_flag_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void SamplingFlags::add_to(CLI::App& sub) {
  SamplingOptions& so = options;
  sub.add_option("--temp", so.temperature, "Temperature (0: greedy)")->capture_default_str();
  sub.add_option("--top-k", so.top_k, "Top-k (0: all)")->capture_default_str();
  sub.add_option("--top-p", so.top_p, "Top-p, in (0, 1] (1: all)")->capture_default_str();
  sub.add_option("--min-p", so.min_p, "Min-p, in [0, 1] (0: off)")->capture_default_str();
  sub.add_option("--typical-p", so.typical_p, "Locally typical sampling, in (0, 1] (1: off)")->capture_default_str();
  sub.add_option("--repeat-penalty", so.repeat_penalty, "Repetition penalty, > 0 (1: off)")->capture_default_str();
  sub.add_option("--repeat-last-n", so.repeat_last_n, "Tokens the penalties look back (0: off, -1: all)")
      ->capture_default_str();
  sub.add_option("--presence-penalty", so.presence_penalty, "Subtracted from the logit of a token seen (0: off)")
      ->capture_default_str();
  sub.add_option("--frequency-penalty", so.frequency_penalty, "Subtracted per occurrence of a token (0: off)")
      ->capture_default_str();
  // One value per occurrence, so that a positional argument after it is not taken.
  sub.add_option("-l,--logit-bias", logit_bias,
                 "TOKEN+BIAS or TOKEN-BIAS added to a token's logit (TOKEN-inf bans it); repeatable")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub.add_option("--seed", so.seed, "Sampling seed (default: a random one per run; --json reports it)");
  sub.add_option("--json-schema", json_schema_file, "Constrain the output to JSON valid under the JSON schema in FILE");
  sub.add_option("--grammar", grammar_file, "Constrain the output to the GBNF grammar in FILE (start rule root)");
}

Status SamplingFlags::resolve(int n_vocab) {
  for (const std::string& b : logit_bias)
    if (Status s = parse_bias(b, options.logit_bias); !s.ok()) return s;
  if (!json_schema_file.empty() && !grammar_file.empty())
    return Status::InvalidArgument("--json-schema and --grammar: give at most one");
  if (!json_schema_file.empty()) {
    LS_ASSIGN_OR_RETURN(structured.text, read_flag_file("--json-schema", json_schema_file));
    structured.kind = StructuredOutput::Kind::kJsonSchema;
  } else if (!grammar_file.empty()) {
    LS_ASSIGN_OR_RETURN(structured.text, read_flag_file("--grammar", grammar_file));
    structured.kind = StructuredOutput::Kind::kGrammar;
  }
  if (auto p = find_sampling_problem(options, n_vocab))
    return Status::InvalidArgument(flag_of_field().at(p->field) + ": " + p->message);
  return Status::OK();
}

}  // namespace layerstream::cli
