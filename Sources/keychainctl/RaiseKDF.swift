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
        guard parameters.isWithinLimits else {
            let mebibytes = (128 * UInt64(blockSize) * (UInt64(1) << UInt64(min(logN, 40)))) >> 20
            throw fail("--log-n must be 1 to 22 and --block-size 1 to 32, with scrypt's memory (128 × r × 2^N bytes) at most 2048 MiB; "
                       + "N = 2^\(logN), r = \(blockSize) would need \(mebibytes) MiB. The default is --log-n 15 --block-size 8 (32 MiB); "
                       + "17 to 20 is a strong cost.", status: ExitStatus.usage)
        }
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
