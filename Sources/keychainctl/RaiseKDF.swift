import ArgumentParser
import KeychainCore
import KeychainCrypto

struct RaiseKDF: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "raise-kdf",
        abstract: "Raise the scrypt cost that protects a keychain's PINs.",
        discussion: """
        The master key is wrapped under a key derived from each PIN, so the new cost applies to a \
        PIN at its next successful login (or when it is changed); 'keychainctl list' shows the cost \
        in use and the one pending. The cost can only go up.

        Examples:
          keychainctl raise-kdf --label login --log-n 17
          keychainctl raise-kdf --label ci --log-n 16 --block-size 8
        """
    )

    @Option(help: "The label of the keychain.")
    var label: String

    @Option(help: "log2 of the scrypt cost N (each step doubles time and memory; 15 is the default).")
    var logN: UInt8

    @Option(help: "The scrypt block size r.")
    var blockSize: UInt32 = ScryptParameters.interactive.blockSize

    func run() throws {
        let directory = KeychainDirectory(path: Configuration.current().directory)
        guard let keychain = directory.keychainFiles().lazy.compactMap({ try? Keychain.open(at: $0) })
            .first(where: { (try? $0.info(countingObjects: false).label) == label }) else {
            throw fail("no keychain labelled '\(label)' (see 'keychainctl list').", status: ExitStatus.failure)
        }
        let parameters = ScryptParameters(logN: logN, blockSize: blockSize, parallelism: 1)
        do {
            try keychain.raiseKDF(to: parameters)
        } catch {
            throw failure(for: error)
        }
        let megabytes = 128 * Int(blockSize) * (1 << Int(logN)) / (1 << 20)
        print("Raised the PIN cost of '\(label)' to N = 2^\(logN), r = \(blockSize) (\(megabytes) MiB per derivation).")
        print("Each PIN moves to it at its next successful login.")
    }
}
