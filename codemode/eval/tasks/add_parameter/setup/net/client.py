def request(url):
    return ('GET', url)
