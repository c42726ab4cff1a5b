// A throwaway PKI for TLS tests, made with the openssl command: a CA, a server
// certificate for localhost/127.0.0.1, client certificates "alice" and "bob" from
// that CA, and "mallory" from a second CA the server does not trust.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/security/credentials.h"

namespace crossreg::testing {

struct TestPki {
  std::string dir;  // removed by the destructor
  std::string ca_pem, server_pem, server_key;
  std::string other_ca_pem;  // a CA nobody trusts
  ~TestPki();
  std::string Cert(const std::string& name) const { return dir + "/" + name + ".pem"; }
  std::string Key(const std::string& name) const { return dir + "/" + name + ".key"; }
  // TLS channel credentials trusting `ca` (default: ours), with `client`'s certificate
  // when it is not empty.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& client = "", std::string ca = "") const;
};

// Null with `error` set when openssl is missing or fails.
std::unique_ptr<TestPki> MakeTestPki(std::string* error);

std::string ReadText(const std::string& path);

}  // namespace crossreg::testing
