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
          keychainctl raise-kdf --log-n 17
          keychainctl raise-kdf --keychain ci --log-n 16 --block-size 8
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: "log2 of the scrypt cost N (each step doubles time and memory; 15 is the default).")
    var logN: UInt8

    @Option(help: "The scrypt block size r.")
    var blockSize: UInt32 = ScryptParameters.interactive.blockSize

    func run() throws {
        let open = try selection.open()
        let keychain = open.keychain
        let label = open.label
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
