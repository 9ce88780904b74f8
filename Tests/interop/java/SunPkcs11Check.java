// Signature, AES-GCM and ChaCha20-Poly1305 checks of OpenJDK's SunPKCS11 provider against the keychain module,
// run by Tests/interop/test_java_sunpkcs11.sh after keytool has put an RSA and an EC key pair
// with their self-signed certificates on the token.
// Usage: java SunPkcs11Check CONFIG PIN RSA_ALIAS EC_ALIAS
// Prints one "ok: ..." or "FAIL: ..." line per check; exits 1 if any check failed.
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Provider;
import java.security.PublicKey;
import java.security.Security;
import java.security.Signature;
import java.security.cert.Certificate;
import java.security.spec.MGF1ParameterSpec;
import java.security.spec.PSSParameterSpec;
import java.util.Arrays;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.KeyGenerator;
import javax.crypto.SecretKey;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;

public final class SunPkcs11Check {
    private static int failures = 0;

    private interface Check {
        String run() throws Exception;
    }

    // check NAME BODY: BODY returns a detail for the "ok" line or throws; either way one line.
    private static void check(String name, Check body) {
        try {
            String detail = body.run();
            System.out.println("ok: " + name + (detail == null || detail.isEmpty() ? "" : " (" + detail + ")"));
        } catch (Throwable e) {
            failures++;
            System.out.println("FAIL: " + name + ": " + describe(e));
        }
    }

    // The exception and its causes on one line (SunPKCS11 wraps the CKR_ code in a PKCS11Exception).
    private static String describe(Throwable e) {
        StringBuilder out = new StringBuilder(e.toString());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            out.append(" <- ").append(c);
        }
        return out.toString();
    }

    // signAndVerify: signs MESSAGE with the token key through the provider, verifies the signature
    // with the certificate's public key through VERIFIER (a JDK software provider), and checks
    // that the same signature does not verify a different message.
    private static String signAndVerify(Provider p11, String algorithm, PSSParameterSpec pss,
            PrivateKey key, PublicKey pub, String verifier, byte[] message) throws Exception {
        Signature signer = Signature.getInstance(algorithm, p11);
        if (pss != null) signer.setParameter(pss);
        signer.initSign(key);
        signer.update(message);
        byte[] signature = signer.sign();

        Signature check = Signature.getInstance(algorithm, verifier);
        if (pss != null) check.setParameter(pss);
        check.initVerify(pub);
        check.update(message);
        if (!check.verify(signature)) {
            throw new GeneralSecurityException(verifier + " does not verify the " + algorithm + " signature");
        }
        byte[] other = message.clone();
        other[0] ^= 1;
        check.initVerify(pub);
        check.update(other);
        if (check.verify(signature)) {
            throw new GeneralSecurityException(verifier + " verifies the signature over a different message");
        }
        return signature.length + "-byte signature by " + signer.getProvider().getName()
                + ", verified by " + check.getProvider().getName();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: SunPkcs11Check CONFIG PIN RSA_ALIAS EC_ALIAS");
            System.exit(64);
        }
        String config = args[0];
        char[] pin = args[1].toCharArray();
        String rsaAlias = args[2];
        String ecAlias = args[3];

        Provider p11 = Security.getProvider("SunPKCS11").configure(config);
        System.out.println("provider: " + p11.getName());
        KeyStore ks = KeyStore.getInstance("PKCS11", p11);
        ks.load(null, pin);

        byte[] message = "Keychain PKCS#11 signs for SunPKCS11".getBytes(StandardCharsets.UTF_8);
        PrivateKey rsaKey = (PrivateKey) ks.getKey(rsaAlias, null);
        PrivateKey ecKey = (PrivateKey) ks.getKey(ecAlias, null);
        Certificate rsaCert = ks.getCertificate(rsaAlias);
        Certificate ecCert = ks.getCertificate(ecAlias);
        check("keystore entries " + rsaAlias + " and " + ecAlias, () -> {
            if (rsaKey == null || ecKey == null) throw new GeneralSecurityException("private key missing");
            if (rsaCert == null || ecCert == null) throw new GeneralSecurityException("certificate missing");
            if (!rsaKey.getAlgorithm().equals("RSA")) throw new GeneralSecurityException("RSA key is " + rsaKey.getAlgorithm());
            if (!ecKey.getAlgorithm().equals("EC")) throw new GeneralSecurityException("EC key is " + ecKey.getAlgorithm());
            return rsaKey.getClass().getSimpleName() + ", " + ecKey.getClass().getSimpleName();
        });

        check("SHA256withRSA", () -> signAndVerify(p11, "SHA256withRSA", null, rsaKey,
                rsaCert.getPublicKey(), "SunRsaSign", message));
        check("SHA256withECDSA", () -> signAndVerify(p11, "SHA256withECDSA", null, ecKey,
                ecCert.getPublicKey(), "SunEC", message));
        PSSParameterSpec pss = new PSSParameterSpec("SHA-256", "MGF1", MGF1ParameterSpec.SHA256, 32, 1);
        check("RSASSA-PSS SHA-256/MGF1-SHA-256/salt 32", () -> signAndVerify(p11, "RSASSA-PSS", pss, rsaKey,
                rsaCert.getPublicKey(), "SunRsaSign", message));

        // AES-256-GCM with a session key generated on the token.
        SecretKey[] aes = new SecretKey[1];
        check("AES-256 KeyGenerator", () -> {
            KeyGenerator generator = KeyGenerator.getInstance("AES", p11);
            generator.init(256);
            aes[0] = generator.generateKey();
            return aes[0].getClass().getSimpleName() + ", " + aes[0].getAlgorithm() + ", format " + aes[0].getFormat();
        });
        byte[] iv = new byte[12];
        for (int i = 0; i < iv.length; i++) iv[i] = (byte) (0xa0 + i);
        byte[] aad = "header".getBytes(StandardCharsets.UTF_8);
        byte[] plain = "forty-two bytes of plaintext for AES-GCM!!".getBytes(StandardCharsets.UTF_8);
        byte[][] sealed = new byte[1][];
        check("AES/GCM/NoPadding encrypt and decrypt", () -> {
            Cipher enc = Cipher.getInstance("AES/GCM/NoPadding", p11);
            enc.init(Cipher.ENCRYPT_MODE, aes[0], new GCMParameterSpec(128, iv));
            enc.updateAAD(aad);
            sealed[0] = enc.doFinal(plain);
            if (sealed[0].length != plain.length + 16) {
                throw new GeneralSecurityException("ciphertext length " + sealed[0].length);
            }
            Cipher dec = Cipher.getInstance("AES/GCM/NoPadding", p11);
            dec.init(Cipher.DECRYPT_MODE, aes[0], new GCMParameterSpec(128, iv));
            dec.updateAAD(aad);
            byte[] back = dec.doFinal(sealed[0]);
            if (!Arrays.equals(back, plain)) throw new GeneralSecurityException("round trip differs");
            return sealed[0].length + " bytes with tag, by " + enc.getProvider().getName();
        });
        check("AES/GCM/NoPadding refuses a tampered tag", () -> {
            if (sealed[0] == null) throw new GeneralSecurityException("no ciphertext (encryption failed)");
            byte[] bad = sealed[0].clone();
            bad[bad.length - 1] ^= 1;
            Cipher dec = Cipher.getInstance("AES/GCM/NoPadding", p11);
            dec.init(Cipher.DECRYPT_MODE, aes[0], new GCMParameterSpec(128, iv));
            dec.updateAAD(aad);
            try {
                byte[] leaked = dec.doFinal(bad);
                throw new IllegalStateException("tampered ciphertext decrypted to " + leaked.length + " bytes");
            } catch (AEADBadTagException e) {
                return "AEADBadTagException: " + describe(e);
            } catch (java.security.ProviderException e) {
                return "ProviderException: " + describe(e);
            }
        });
        check("AES/GCM/NoPadding refuses other AAD", () -> {
            if (sealed[0] == null) throw new GeneralSecurityException("no ciphertext (encryption failed)");
            Cipher dec = Cipher.getInstance("AES/GCM/NoPadding", p11);
            dec.init(Cipher.DECRYPT_MODE, aes[0], new GCMParameterSpec(128, iv));
            dec.updateAAD("HEADER".getBytes(StandardCharsets.UTF_8));
            try {
                dec.doFinal(sealed[0]);
                throw new IllegalStateException("ciphertext decrypted with other AAD");
            } catch (AEADBadTagException e) {
                return "AEADBadTagException";
            } catch (java.security.ProviderException e) {
                return "ProviderException: " + describe(e);
            }
        });

        // ChaCha20-Poly1305 through the token (CKM_CHACHA20_POLY1305 on a key SunPKCS11 makes a
        // CKK_CHACHA20 session object of), against SunJCE's own implementation.
        byte[] chachaKey = new byte[32];
        for (int i = 0; i < chachaKey.length; i++) chachaKey[i] = (byte) (7 * i + 1);
        SecretKeySpec chacha = new SecretKeySpec(chachaKey, "ChaCha20");
        check("ChaCha20-Poly1305 as SunJCE computes it", () -> {
            Cipher enc = Cipher.getInstance("ChaCha20-Poly1305", p11);
            enc.init(Cipher.ENCRYPT_MODE, chacha, new IvParameterSpec(iv));
            enc.updateAAD(aad);
            byte[] ours = enc.doFinal(plain);
            Cipher reference = Cipher.getInstance("ChaCha20-Poly1305", "SunJCE");
            reference.init(Cipher.ENCRYPT_MODE, chacha, new IvParameterSpec(iv));
            reference.updateAAD(aad);
            if (!Arrays.equals(ours, reference.doFinal(plain))) throw new GeneralSecurityException("ciphertext differs from SunJCE's");
            Cipher dec = Cipher.getInstance("ChaCha20-Poly1305", p11);
            dec.init(Cipher.DECRYPT_MODE, chacha, new IvParameterSpec(iv));
            dec.updateAAD(aad);
            if (!Arrays.equals(dec.doFinal(ours), plain)) throw new GeneralSecurityException("round trip differs");
            byte[] bad = ours.clone();
            bad[3] ^= 1;
            Cipher refuse = Cipher.getInstance("ChaCha20-Poly1305", p11);
            refuse.init(Cipher.DECRYPT_MODE, chacha, new IvParameterSpec(iv));
            refuse.updateAAD(aad);
            try {
                refuse.doFinal(bad);
                throw new IllegalStateException("tampered ChaCha20-Poly1305 ciphertext decrypted");
            } catch (AEADBadTagException e) {
                // expected
            } catch (java.security.ProviderException e) {
                // SunPKCS11 may wrap CKR_ENCRYPTED_DATA_INVALID so
            }
            return ours.length + " bytes, the same as SunJCE's, by " + enc.getProvider().getName() + "; a tampered one refused";
        });

        System.out.println(failures == 0 ? "all checks passed" : failures + " check(s) failed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
