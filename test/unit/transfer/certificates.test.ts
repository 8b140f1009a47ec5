import "reflect-metadata";
import { createPrivateKey, X509Certificate as NodeX509Certificate } from "node:crypto";
import {
  BasicConstraintsExtension,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  KeyUsageFlags,
  KeyUsagesExtension,
  SubjectAlternativeNameExtension,
  X509Certificate,
} from "@peculiar/x509";
import { beforeAll, describe, expect, it } from "vitest";
import { generateTransferPki, type TransferPki } from "../../../src/transfer/certificates";

const now = new Date("2030-01-01T00:00:00Z");
let pki: TransferPki;

beforeAll(async () => {
  pki = await generateTransferPki({ commonName: "dvm-1a2b3c4d5e", serverDnsNames: ["rsync-server.dvm.local", "dvm-rsync.ns.svc"], now });
});

describe("generateTransferPki", () => {
  it("makes a CA that can only sign certificates", () => {
    const ca = new X509Certificate(pki.caCertPem);
    expect(ca.subject).toBe("CN=dvm-1a2b3c4d5e transfer CA");
    const basic = ca.getExtension(BasicConstraintsExtension);
    expect(basic?.ca).toBe(true);
    expect(basic?.critical).toBe(true);
    expect(ca.getExtension(KeyUsagesExtension)?.usages).toBe(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign);
  });

  it("signs a server certificate for the given names plus loopback, usable only for serverAuth", () => {
    const server = new X509Certificate(pki.serverCertPem);
    expect(server.issuer).toBe("CN=dvm-1a2b3c4d5e transfer CA");
    expect(server.getExtension(BasicConstraintsExtension)?.ca).toBe(false);
    expect(server.getExtension(ExtendedKeyUsageExtension)?.usages).toEqual([ExtendedKeyUsage.serverAuth]);
    const names = server.getExtension(SubjectAlternativeNameExtension)?.names.items.map((n) => `${n.type}:${n.value}`);
    expect(names).toEqual(["dns:rsync-server.dvm.local", "dns:dvm-rsync.ns.svc", "dns:localhost", "ip:127.0.0.1", "ip:::1"]);
  });

  it("signs a separate client certificate usable only for clientAuth", () => {
    const client = new X509Certificate(pki.clientCertPem);
    expect(client.subject).toBe("CN=dvm-1a2b3c4d5e rsync client");
    expect(client.getExtension(ExtendedKeyUsageExtension)?.usages).toEqual([ExtendedKeyUsage.clientAuth]);
    expect(client.getExtension(SubjectAlternativeNameExtension)).toBeNull();
  });

  it("chains both leaves to the CA (checked with Node's OpenSSL)", () => {
    const ca = new NodeX509Certificate(pki.caCertPem);
    expect(new NodeX509Certificate(pki.serverCertPem).verify(ca.publicKey)).toBe(true);
    expect(new NodeX509Certificate(pki.clientCertPem).verify(ca.publicKey)).toBe(true);
    expect(new NodeX509Certificate(pki.serverCertPem).checkHost("rsync-server.dvm.local")).toBe("rsync-server.dvm.local");
    expect(new NodeX509Certificate(pki.serverCertPem).checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(new NodeX509Certificate(pki.serverCertPem).checkHost("evil.example")).toBeUndefined();
  });

  it("exports the keys as PKCS#8 P-256 PEM matching their certificates", () => {
    for (const [certPem, keyPem] of [
      [pki.serverCertPem, pki.serverKeyPem],
      [pki.clientCertPem, pki.clientKeyPem],
    ] as const) {
      expect(keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
      const key = createPrivateKey(keyPem);
      expect(key.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
      expect(new NodeX509Certificate(certPem).checkPrivateKey(key)).toBe(true);
    }
  });

  it("is valid from 5 minutes before `now` for validDays (default 365)", () => {
    const server = new X509Certificate(pki.serverCertPem);
    expect(server.notBefore.toISOString()).toBe("2029-12-31T23:55:00.000Z");
    expect(server.notAfter.toISOString()).toBe("2031-01-01T00:00:00.000Z");
  });

  it("gives every migration its own CA and keys", async () => {
    const other = await generateTransferPki({ commonName: "dvm-1a2b3c4d5e", serverDnsNames: ["rsync-server.dvm.local"], now });
    expect(other.caCertPem).not.toBe(pki.caCertPem);
    expect(other.serverKeyPem).not.toBe(pki.serverKeyPem);
    const ca = new NodeX509Certificate(pki.caCertPem);
    expect(new NodeX509Certificate(other.clientCertPem).verify(ca.publicKey)).toBe(false);
  });

  it("can leave loopback names out and refuses bad input naming the field", async () => {
    const noLoopback = await generateTransferPki({ commonName: "x", serverDnsNames: ["a.example"], includeLoopback: false, validDays: 2, now });
    expect(new X509Certificate(noLoopback.serverCertPem).getExtension(SubjectAlternativeNameExtension)?.names.items.map((n) => n.value)).toEqual(["a.example"]);
    await expect(generateTransferPki({ commonName: "x", serverDnsNames: ["bad name"] })).rejects.toThrow(/serverDnsNames\[0\]/);
    await expect(generateTransferPki({ commonName: "x\nCN=evil", serverDnsNames: [] })).rejects.toThrow(/commonName/);
    await expect(generateTransferPki({ commonName: "x", serverDnsNames: [], includeLoopback: false })).rejects.toThrow(/at least one name/);
    await expect(generateTransferPki({ commonName: "x", serverDnsNames: ["a"], validDays: 0 })).rejects.toThrow(/validDays/);
  });
});
