#include "tests/integration/test_certificates.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace crossreg::testing {
namespace {

bool Run(const std::string& command, std::string* error) {
  if (std::system((command + " >/dev/null 2>&1").c_str()) == 0) return true;
  *error = "failed: " + command;
  return false;
}

// An EC P-256 key and a certificate signed by `ca` (self-signed when empty).
bool Issue(const std::string& dir, const std::string& name, const std::string& subject, const std::string& ca,
           const std::string& san, std::string* error) {
  const std::string key = dir + "/" + name + ".key", pem = dir + "/" + name + ".pem", csr = dir + "/" + name + ".csr";
  const std::string new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (ca.empty()) {
    return Run("openssl req -x509 " + new_key + " -days 2 -subj " + subject + " -keyout " + key + " -out " + pem,
               error);
  }
  if (!Run("openssl req " + new_key + " -subj " + subject + " -keyout " + key + " -out " + csr, error)) return false;
  std::string extensions;
  if (!san.empty()) {
    const std::string ext = dir + "/" + name + ".ext";
    std::ofstream(ext) << "subjectAltName=" << san << "\n";
    extensions = " -extfile " + ext;
  }
  return Run("openssl x509 -req -in " + csr + " -CA " + dir + "/" + ca + ".pem -CAkey " + dir + "/" + ca +
                 ".key -CAcreateserial -days 2" + extensions + " -out " + pem,
             error);
}

}  // namespace

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TestPki::~TestPki() {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::shared_ptr<grpc::ChannelCredentials> TestPki::Credentials(const std::string& client, std::string ca) const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadText(ca.empty() ? ca_pem : ca);
  if (!client.empty()) {
    options.pem_cert_chain = ReadText(Cert(client));
    options.pem_private_key = ReadText(Key(client));
  }
  return grpc::SslCredentials(options);
}

std::unique_ptr<TestPki> MakeTestPki(std::string* error) {
  auto pki = std::make_unique<TestPki>();
  pki->dir = (std::filesystem::temp_directory_path() / ("crossreg_pki_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(pki->dir);
  const std::string& d = pki->dir;
  if (!Issue(d, "ca", "/CN=crossreg-test-ca", "", "", error) ||
      !Issue(d, "server", "/CN=localhost", "ca", "DNS:localhost,IP:127.0.0.1", error) ||
      !Issue(d, "alice", "/CN=alice", "ca", "", error) || !Issue(d, "bob", "/CN=bob", "ca", "", error) ||
      !Issue(d, "other_ca", "/CN=untrusted-ca", "", "", error) ||
      !Issue(d, "mallory", "/CN=mallory", "other_ca", "", error)) {
    return nullptr;
  }
  pki->ca_pem = pki->Cert("ca");
  pki->server_pem = pki->Cert("server");
  pki->server_key = pki->Key("server");
  pki->other_ca_pem = pki->Cert("other_ca");
  return pki;
}

}  // namespace crossreg::testing
