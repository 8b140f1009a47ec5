/**
 * The PKI of one migration's stunnel tunnel. Upstream used one self-signed certificate shared by both
 * ends with verification off; here a fresh CA signs a server certificate (serverAuth, SANs the client
 * checks) and a separate client certificate (clientAuth), and both ends verify the other against the
 * CA. The CA private key is thrown away after signing, so nobody can mint a third certificate that the
 * tunnel would accept. OpenSSL enforces the extended key usages, so neither leaf can stand in for the
 * other.
 *
 * Keys are ECDSA P-256 in PKCS#8 PEM, which OpenSSL 3 (stunnel) reads directly. The returned object
 * holds private keys: store it in a Secret, never log it (log `transferPkiSummary` instead).
 */
// @peculiar/x509 resolves its services through tsyringe, which needs the Reflect metadata API loaded
// before the library itself.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  type Extension,
  type JsonGeneralName,
  KeyUsageFlags,
  KeyUsagesExtension,
  PemConverter,
  SubjectAlternativeNameExtension,
  SubjectKeyIdentifierExtension,
  X509CertificateGenerator,
} from "@peculiar/x509";
import { TransferConfigError } from "./configText";

export interface TransferPki {
  caCertPem: string;
  serverCertPem: string;
  serverKeyPem: string;
  clientCertPem: string;
  clientKeyPem: string;
}

export interface TransferPkiOptions {
  /** Names the CA and prefixes the leaf subjects, e.g. "dvm-1a2b3c4d5e". Appears in stunnel logs. */
  commonName: string;
  /** DNS names the server certificate is valid for; the client checks one of them (`checkHost`). */
  serverDnsNames: string[];
  /** IP addresses the server certificate is valid for (`checkIP`). */
  serverIpAddresses?: string[];
  /** Also list localhost, 127.0.0.1 and ::1 in the server certificate. Default true (loopback tests). */
  includeLoopback?: boolean;
  /** Validity of the CA and both leaves, in days. Default 365. */
  validDays?: number;
  /** Issue time; certificates are back-dated 5 minutes against clock skew between clusters. Default now. */
  now?: Date;
}

export const TRANSFER_PKI_DEFAULT_VALID_DAYS = 365;
const CLOCK_SKEW_MS = 5 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

const EC_KEY: webcrypto.EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING: webcrypto.EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
// Node's WebCrypto, passed explicitly so the library's global provider is never mutated.
const crypto = webcrypto;

const DNS_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

export async function generateTransferPki(options: TransferPkiOptions): Promise<TransferPki> {
  const commonName = checkCommonName(options.commonName);
  const validDays = options.validDays ?? TRANSFER_PKI_DEFAULT_VALID_DAYS;
  if (!Number.isInteger(validDays) || validDays < 1) throw new TransferConfigError("validDays", `must be a positive integer, got ${validDays}`);
  const now = options.now ?? new Date();
  const notBefore = new Date(now.getTime() - CLOCK_SKEW_MS);
  const notAfter = new Date(now.getTime() + validDays * DAY_MS);
  const subjectAltNames = serverSubjectAltNames(options);

  const caKeys = await generateKeyPair();
  const caName = [{ CN: [`${commonName} transfer CA`] }];
  const ca = await X509CertificateGenerator.createSelfSigned(
    {
      name: caName,
      keys: caKeys,
      notBefore,
      notAfter,
      signingAlgorithm: SIGNING,
      extensions: [
        new BasicConstraintsExtension(true, 0, true),
        new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign, true),
        await SubjectKeyIdentifierExtension.create(caKeys.publicKey, false, crypto),
      ],
    },
    crypto,
  );

  const issueLeaf = async (subject: string, usage: ExtendedKeyUsage, extra: Extension[]) => {
    const keys = await generateKeyPair();
    const cert = await X509CertificateGenerator.create(
      {
        subject: [{ CN: [subject] }],
        issuer: caName,
        publicKey: keys.publicKey,
        signingKey: caKeys.privateKey,
        notBefore,
        notAfter,
        signingAlgorithm: SIGNING,
        extensions: [
          new BasicConstraintsExtension(false, undefined, true),
          new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
          new ExtendedKeyUsageExtension([usage], false),
          await SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
          await AuthorityKeyIdentifierExtension.create(caKeys.publicKey, false, crypto),
          ...extra,
        ],
      },
      crypto,
    );
    return { certPem: cert.toString("pem"), keyPem: await exportPrivateKeyPem(keys.privateKey) };
  };

  const server = await issueLeaf(`${commonName} rsync server`, ExtendedKeyUsage.serverAuth, [new SubjectAlternativeNameExtension(subjectAltNames, false)]);
  const client = await issueLeaf(`${commonName} rsync client`, ExtendedKeyUsage.clientAuth, []);
  return {
    caCertPem: ca.toString("pem"),
    serverCertPem: server.certPem,
    serverKeyPem: server.keyPem,
    clientCertPem: client.certPem,
    clientKeyPem: client.keyPem,
  };
}

function serverSubjectAltNames(options: TransferPkiOptions): JsonGeneralName[] {
  const dns = [...options.serverDnsNames];
  const ips = [...(options.serverIpAddresses ?? [])];
  if (options.includeLoopback ?? true) {
    dns.push("localhost");
    ips.push("127.0.0.1", "::1");
  }
  if (dns.length + ips.length === 0) throw new TransferConfigError("serverDnsNames", "the server certificate needs at least one name");
  dns.forEach((name, i) => {
    if (!DNS_NAME.test(name)) throw new TransferConfigError(`serverDnsNames[${i}]`, `"${name}" is not a DNS name`);
  });
  ips.forEach((ip, i) => {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(ip) && !/^[0-9A-Fa-f:]+$/.test(ip))
      throw new TransferConfigError(`serverIpAddresses[${i}]`, `"${ip}" is not an IP address`);
  });
  return [
    ...[...new Set(dns)].map((value): JsonGeneralName => ({ type: "dns", value })),
    ...[...new Set(ips)].map((value): JsonGeneralName => ({ type: "ip", value })),
  ];
}

function checkCommonName(name: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,40}$/.test(name)) {
    throw new TransferConfigError("commonName", "must be 1-41 letters, digits, spaces, '.', '_' or '-'");
  }
  return name;
}

async function generateKeyPair(): Promise<webcrypto.CryptoKeyPair> {
  return (await crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
}

async function exportPrivateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", key);
  return `${PemConverter.encode(pkcs8, "PRIVATE KEY")}\n`;
}
