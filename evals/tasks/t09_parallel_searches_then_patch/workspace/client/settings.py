SERVER_URL = "http://localhost:0000"
