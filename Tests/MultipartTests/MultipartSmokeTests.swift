import Testing
@testable import Multipart
